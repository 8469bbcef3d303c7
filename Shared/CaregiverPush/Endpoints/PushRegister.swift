import OpenSSLCrypto
import FunctionRuntime
import FoundationEssentials

/// `POST /api/push/register` — a caregiver registers (or refreshes) a phone for pushes
/// (docs/behaviour.md#push-register).
///
/// Body `{token | fid, platform, environment, installationId?, language?}` → 200 `{"ok": true}`. Idempotent. `fid`
/// is the Firebase Installation ID that FCM addresses since 2026; a FID registration replaces the token registered by
/// the same installation (docs/behaviour.md#devices). `language` is the app's language (a BCP 47 tag such as `en` or
/// `ja-JP`): the device's pushes are worded in it (docs/behaviour.md#language).
///
/// With `"statusOnly": true` it changes nothing and answers the caregiver's record of that token instead:
/// `{"ok": true, "device": {"enabled": false, "disabledReason": "UNREGISTERED"}}`, or `"device": null` when there is
/// none. The app reads it on launch and on return to the foreground, to learn that the server disabled the phone
/// (FCM said the token is gone) and show push as OFF with the reason. It is a mode of this endpoint rather than a
/// route of its own so that the function table keeps one function per device operation.
public struct PushRegister: Endpoint {
    public static let function = FunctionName.pushRegister
    public let method = "POST"

    public init() {}

    /// The answer: `{"ok": true}` for a registration, the device's status for `statusOnly`.
    public enum Response: Encodable, Sendable {
        case registered
        case status(StatusBody)

        public func encode(to encoder: any Encoder) throws {
            switch self {
            case .registered: try OKBody().encode(to: encoder)
            case .status(let body): try body.encode(to: encoder)
            }
        }
    }

    public func handle(
        _ request: FunctionRequest, context: InvocationContext, writer: EndpointWriter<Response>
    ) throws -> Responded {
        let caregiverID = try context.authenticator.authenticate(
            request, database: context.database, now: context.now, logger: context.logger
        ).requireCaregiver()
        let body = try RequestBody(request)
        let registration = try Self.validate(body)
        if try Self.isStatusOnly(body) {
            let status = try PushDeviceRegistry(connection: context.database.connection())
                .status(token: registration.token, caregiverID: caregiverID)
            writer.note(
                "push device status read",
                [
                    "push.token_hash": .string(SHA256.hexPrefix(of: registration.token)),
                    "push.found": .stringConvertible(status != nil),
                ])
            return try writer.respond(.status(StatusBody(device: status)))
        }
        let result = try PushDeviceRegistry(connection: context.database.connection())
            .register(
                registration, caregiverID: caregiverID, deviceCap: context.configuration.pushMaxDevicesPerCaregiver)
        writer.note(
            "push device registered",
            [
                "push.device": .string(result.deviceID.uuidString.lowercased()),
                "push.token_hash": .string(SHA256.hexPrefix(of: registration.token)),
                "push.environment": .string(registration.environment.rawValue),
                "push.replaced": .stringConvertible(result.replaced),
                "push.reassigned": .stringConvertible(result.reassigned),
                "push.over_cap": .stringConvertible(result.overCap),
            ])
        return try writer.respond(.registered)
    }

    /// `statusOnly`, read after ``validate(_:)`` has accepted the rest.
    static func isStatusOnly(_ body: RequestBody) throws(Problem) -> Bool {
        var fields = FieldValidator(body)
        let statusOnly = fields.flag("statusOnly")
        try fields.finish()
        return statusOnly
    }

    /// The answer of a `statusOnly` request; `device` is `null` when the caregiver has no device with the token.
    public struct StatusBody: Encodable, Sendable {
        let device: PushDeviceRegistry.DeviceStatus?

        enum CodingKeys: String, CodingKey { case ok, device }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(true, forKey: .ok)
            try container.encode(device, forKey: .device)
        }
    }

    /// Checks every field and reports all invalid ones at once (422).
    static func validate(_ body: RequestBody) throws(Problem) -> PushDeviceRegistry.Registration {
        var fields = FieldValidator(body)
        let identity = fields.deviceIdentity()
        let platform = fields.oneOf("platform", PushDeviceRegistry.Platform.self, message: "platform must be ios")
        let environment = fields.oneOf(
            "environment", Configuration.PushEnvironment.self, message: "environment must be DEV or PROD")
        let installationID = fields.string(
            "installationId", required: false,
            invalidMessage: "installationId must be a string of 1 to 128 printable ASCII characters"
        ) { value in
            (1...128).contains(value.utf8.count) && value.consists { $0 >= 0x21 && $0 <= 0x7E }
        }
        let language = fields.string(
            "language", required: false,
            invalidMessage: "language must be a BCP 47 language tag such as en or ja-JP (at most 35 characters)",
            isValid: Self.isLanguageTag)
        _ = fields.flag("statusOnly")
        try fields.finish()
        guard let identity, let platform, let environment else { throw .validation(fields.errors) }
        return .init(
            token: identity.text, target: identity.target, platform: platform, environment: environment,
            installationID: installationID, language: language.map(Self.primaryLanguage))
    }

    /// A BCP 47 tag as apps send them: a 2–3 letter primary language, then subtags of 1–8 letters or digits.
    static func isLanguageTag(_ value: String) -> Bool {
        guard value.utf8.count <= 35 else { return false }
        let subtags = value.split(separator: "-", omittingEmptySubsequences: false)
        guard let primary = subtags.first, (2...3).contains(primary.utf8.count),
            primary.utf8.allSatisfy({ ($0 | 0x20) >= UInt8(ascii: "a") && ($0 | 0x20) <= UInt8(ascii: "z") })
        else { return false }
        return subtags.dropFirst().allSatisfy { subtag in
            (1...8).contains(subtag.utf8.count)
                && subtag.utf8.allSatisfy {
                    ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9"))
                        || (($0 | 0x20) >= UInt8(ascii: "a") && ($0 | 0x20) <= UInt8(ascii: "z"))
                }
        }
    }

    /// The tag's primary language, lowercased (`ja-JP` → `ja`): what `push_devices.language` holds.
    static func primaryLanguage(_ tag: String) -> String {
        String(tag.prefix { $0 != "-" }).lowercased()
    }
}

import OpenSSLCrypto
import FunctionRuntime
import FoundationEssentials

/// `POST /api/push/register` — a caregiver registers (or refreshes) a phone for pushes
/// (docs/behaviour.md#push-register).
///
/// Body `{token | fid, platform, environment, installationId?}` → 200 `{"ok": true}`. Idempotent. `fid` is the
/// Firebase Installation ID that FCM addresses since 2026; a FID registration replaces the token registered by the
/// same installation (docs/behaviour.md#devices).
///
/// With `"statusOnly": true` it changes nothing and answers the caregiver's record of that token instead:
/// `{"ok": true, "device": {"enabled": false, "disabledReason": "UNREGISTERED"}}`, or `"device": null` when there is
/// none. The app reads it on launch and on return to the foreground, to learn that the server disabled the phone
/// (FCM said the token is gone) and show push as OFF with the reason. It is a mode of this endpoint rather than a
/// route of its own so that the function table keeps one function per device operation.
public struct PushRegister: Endpoint {
    public let functionName = "push-register"
    public let method = "POST"

    public init() {}

    public func handle(
        _ request: FunctionRequest, context: InvocationContext, respond: (any Encodable & Sendable) throws -> Void
    ) throws {
        let caregiverID = try context.authenticator
            .authenticate(request, context: context).requireCaregiver()
        let body = try RequestBody(request)
        let registration = try Self.validate(body)
        if try Self.isStatusOnly(body) {
            let status = try PushDeviceRegistry(connection: context.database.connection())
                .status(token: registration.token, caregiverID: caregiverID)
            context.logger.info(
                "push device status read",
                metadata: [
                    "push.token_hash": .string(SHA256.hexPrefix(of: registration.token)),
                    "push.found": .stringConvertible(status != nil),
                ])
            try respond(StatusBody(device: status))
            return
        }
        let result = try PushDeviceRegistry(connection: context.database.connection())
            .register(
                registration, caregiverID: caregiverID, deviceCap: context.configuration.pushMaxDevicesPerCaregiver)
        context.logger.info(
            "push device registered",
            metadata: [
                "push.device": .string(result.deviceID.uuidString.lowercased()),
                "push.token_hash": .string(SHA256.hexPrefix(of: registration.token)),
                "push.environment": .string(registration.environment.rawValue),
                "push.replaced": .stringConvertible(result.replaced),
                "push.reassigned": .stringConvertible(result.reassigned),
                "push.over_cap": .stringConvertible(result.overCap),
            ])
        try respond(OKBody())
    }

    /// `statusOnly`, read after ``validate(_:)`` has accepted the rest.
    static func isStatusOnly(_ body: RequestBody) throws(Problem) -> Bool {
        var fields = FieldValidator(body)
        let statusOnly = fields.flag("statusOnly")
        try fields.finish()
        return statusOnly
    }

    /// The answer of a `statusOnly` request; `device` is `null` when the caregiver has no device with the token.
    struct StatusBody: Encodable, Sendable {
        let device: PushDeviceRegistry.DeviceStatus?

        enum CodingKeys: String, CodingKey { case ok, device }

        func encode(to encoder: any Encoder) throws {
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
        _ = fields.flag("statusOnly")
        try fields.finish()
        guard let identity, let platform, let environment else { throw .validation(fields.errors) }
        return .init(
            token: identity.text, target: identity.target, platform: platform, environment: environment,
            installationID: installationID)
    }
}

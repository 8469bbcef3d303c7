import OpenSSLCrypto
import FunctionRuntime
import FoundationEssentials

/// `POST /api/push/register` — a caregiver registers (or refreshes) a phone for pushes (SPEC §6).
///
/// Body `{token, platform, environment, installationId?}` → 200 `{"ok": true}`. Idempotent.
public struct PushRegister: Endpoint {
    public let functionName = "push-register"
    public let method = "POST"

    public init() {}

    public func handle(_ request: FunctionRequest, context: InvocationContext) throws -> EndpointResponse {
        let caregiverID = try context.authenticator
            .authenticate(request, context: context).requireCaregiver()
        let registration = try Self.validate(RequestBody(request))
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
        return EndpointResponse(body: OKBody())
    }

    /// Checks every field and reports all invalid ones at once (422).
    static func validate(_ body: RequestBody) throws(Problem) -> PushDeviceRegistry.Registration {
        var fields = FieldValidator(body)
        let token = fields.deviceToken()
        let platform = fields.oneOf("platform", PushDeviceRegistry.Platform.self, message: "platform must be ios")
        let environment = fields.oneOf(
            "environment", Configuration.PushEnvironment.self, message: "environment must be DEV or PROD")
        let installationID = fields.string(
            "installationId", required: false,
            invalidMessage: "installationId must be a string of 1 to 128 printable ASCII characters"
        ) { value in
            (1...128).contains(value.utf8.count) && value.consists { $0 >= 0x21 && $0 <= 0x7E }
        }
        try fields.finish()
        guard let token, let platform, let environment else { throw .validation(fields.errors) }
        return .init(token: token, platform: platform, environment: environment, installationID: installationID)
    }
}

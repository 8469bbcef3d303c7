import OpenSSLCrypto
import FunctionRuntime
import FoundationEssentials

/// `POST /api/push/unregister` — a caregiver turns pushes off for one phone (docs/behaviour.md#push-unregister).
///
/// Body `{token}` → 200 `{"ok": true}`, also when nothing matched: the device is soft-disabled (`USER_DISABLED`),
/// never deleted, and only the caller's own row can be touched.
public struct PushUnregister: Endpoint {
    public static let function = FunctionName.pushUnregister
    public let method = "POST"

    public init() {}

    public func handle(
        _ request: FunctionRequest, context: InvocationContext, writer: EndpointWriter<OKBody>
    ) throws -> Responded {
        let caregiverID = try context.authenticator.authenticate(
            request, database: context.database, now: context.now, logger: context.logger
        ).requireCaregiver()
        let token = try Self.validate(RequestBody(request))
        let disabled = try PushDeviceRegistry(connection: context.database.connection())
            .unregister(token: token, caregiverID: caregiverID)
        writer.note(
            "push device unregistered",
            [
                "push.token_hash": .string(SHA256.hexPrefix(of: token)), "push.disabled": .stringConvertible(disabled),
            ])
        return try writer.respond(OKBody())
    }

    /// Checks the body (422 when `token` is missing or invalid) and returns the device token.
    static func validate(_ body: RequestBody) throws(Problem) -> String {
        var fields = FieldValidator(body)
        let identity = fields.deviceIdentity()
        try fields.finish()
        guard let identity else { throw .validation(fields.errors) }
        return identity.text
    }
}

/// `{"ok": true}`, the answer of the device endpoints.
public struct OKBody: Codable, Sendable, Equatable {
    public let ok: Bool
    public init() { ok = true }
}

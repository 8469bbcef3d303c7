// push-register's work on postgres-nio + jwt-kit: read one API Gateway HTTP API 2.0 event on stdin, verify its bearer
// token (HS256, SUPABASE_JWT_SECRET), upsert the device in one statement, write one JSON response, exit.
import Foundation
import JWTKit
import Logging
import PostgresNIO

struct Claims: JWTPayload {
    var sub: SubjectClaim
    var exp: ExpirationClaim
    var aud: AudienceClaim
    func verify(using algorithm: some JWTAlgorithm) async throws {
        try exp.verifyNotExpired()
        try aud.verifyIntendedAudience(includes: "authenticated")
    }
}

struct Event: Decodable {
    var headers: [String: String]
    var body: String?
}

struct Registration: Decodable {
    var token: String
    var platform: String
    var environment: String
    var installationId: String?
}

func answer(_ status: Int, _ body: String) {
    let response: [String: Any] = [
        "statusCode": status, "headers": ["content-type": "application/json"], "body": body,
    ]
    let data = try! JSONSerialization.data(withJSONObject: response)
    FileHandle.standardOutput.write(data)
}

let environment = ProcessInfo.processInfo.environment
let input = FileHandle.standardInput.readDataToEndOfFile()
let event = try JSONDecoder().decode(Event.self, from: input)
guard let authorization = event.headers["authorization"], authorization.hasPrefix("Bearer ") else {
    answer(401, #"{"code":"UNAUTHORIZED"}"#)
    exit(0)
}
let keys = JWTKeyCollection()
await keys.add(hmac: HMACKey(from: environment["SUPABASE_JWT_SECRET"] ?? ""), digestAlgorithm: .sha256)
let claims: Claims
do {
    claims = try await keys.verify(String(authorization.dropFirst("Bearer ".count)), as: Claims.self)
} catch {
    answer(401, #"{"code":"UNAUTHORIZED"}"#)
    exit(0)
}
let registration = try JSONDecoder().decode(Registration.self, from: Data((event.body ?? "").utf8))

var logger = Logger(label: "probe-register")
logger.logLevel = .error
let url = URLComponents(string: environment["DATABASE_URL"] ?? "")!
let configuration = PostgresConnection.Configuration(
    host: url.host ?? "127.0.0.1", port: url.port ?? 5432, username: url.user ?? "postgres", password: url.password,
    database: String(url.path.dropFirst()), tls: .disable)
let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
let owner = UUID(uuidString: claims.sub.value)!
let upsert: PostgresQuery = """
    INSERT INTO caregiver_push.push_devices
        (owner_type, owner_id, token, token_sha256, platform, environment, installation_id, is_enabled, last_seen_at)
    VALUES ('CAREGIVER', \(owner), \(registration.token), sha256(convert_to(\(registration.token), 'UTF8')), \(registration.platform),
            \(registration.environment), \(registration.installationId), true, now())
    ON CONFLICT ON CONSTRAINT push_devices_owner_token_key DO UPDATE SET
        platform = EXCLUDED.platform, environment = EXCLUDED.environment,
        installation_id = COALESCE(EXCLUDED.installation_id, push_devices.installation_id),
        is_enabled = true, disabled_reason = NULL, last_seen_at = now(), updated_at = now()
    RETURNING id
    """
let rows: PostgresRowSequence = try await connection.query(upsert, logger: logger)
var deviceID: UUID?
for try await id in rows.decode(UUID.self) { deviceID = id }
try await connection.close().get()
answer(200, #"{"deviceId":"\#(deviceID!.uuidString.lowercased())"}"#)

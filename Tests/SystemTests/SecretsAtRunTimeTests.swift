import Codecs
import FunctionRuntime
import CaregiverPush
import Foundation
import Testing
import TestFixtures
import TestSupport

/// Secrets read at run time through the Parameters and Secrets extension (its local stand-in): the built functions
/// with `*_SECRET_ARN` variables and no secret in their environment, one-shot and as warm Runtime-API workers.
@Suite("secrets at run time (Parameters and Secrets extension)", .timeLimit(.minutes(3)))
struct SecretsAtRunTimeTests {
    static let databaseARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:caregiver-push/database-AbCdEf"
    static let jwtARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:caregiver-push/jwt-GhIjKl"

    /// The database secret as RDS and Secrets Manager rotation write it, for the test database.
    static func rdsSecret(password: String? = nil) throws -> String {
        let url = try #require(URLComponents(string: TestDatabase.url))
        var members: [String: Any] = [
            "engine": "postgres", "host": url.host ?? "127.0.0.1", "port": url.port ?? 5432,
            "username": url.user ?? "postgres", "dbname": String(url.path.dropFirst()),
            "password": password ?? url.password ?? "",
        ]
        members["dbClusterIdentifier"] = "caregiver-push"
        return String(decoding: try JSONSerialization.data(withJSONObject: members), as: UTF8.self)
    }

    /// A function's environment on Lambda: ARNs, the extension's variables, no secret value.
    /// The runner with one warm worker reading its secrets through `fake`, refreshed every second (a grace of two).
    static func warmServer(_ fake: SecretsExtensionFake) throws -> RunnerServer {
        try RunnerServer(
            arguments: ["--mode", "warm", "--warm-workers", "1"],
            environment: lambdaEnvironment(fake, ["SECRETS_REFRESH_SECONDS": "1"]))
    }

    /// Registers a new device with a caregiver token signed by `secret`; the answer's status.
    static func register(on server: RunnerServer, secret: String) throws -> Int {
        try server.post(
            "/api/push/register", bearer: try caregiverToken(UUID(), secret: secret),
            body: ["token": .string(makeDeviceToken()), "platform": .string("ios"), "environment": .string("DEV")]
        ).status
    }

    static func lambdaEnvironment(_ fake: SecretsExtensionFake, _ extra: [String: String] = [:]) -> [String: String] {
        var environment = fake.environment
        environment["DATABASE_SECRET_ARN"] = databaseARN
        environment["SUPABASE_JWT_SECRET_ARN"] = jwtARN
        environment["PUSH_ENVIRONMENT"] = "DEV"
        environment.merge(extra) { _, new in new }
        return environment
    }

    static func registration(caregiver: UUID, secret: String = testJWTSecret) throws -> (Data, String) {
        let device = makeDeviceToken()
        let event = try Executables.fixture(
            "push-register/valid.json",
            [
                "CAREGIVER_TOKEN": try caregiverToken(caregiver, secret: secret), "DEVICE_TOKEN": device,
                "INSTALLATION_ID": "install-\(UUID().uuidString)",
            ])
        return (event, device)
    }

    @Test("push-register reads the RDS-shaped database secret and the JWT secret through the extension")
    func readsSecretsAtStart() throws {
        let fake = try SecretsExtensionFake(secrets: [
            Self.databaseARN: try Self.rdsSecret(), Self.jwtARN: testJWTSecret,
        ])
        let caregiver = UUID()
        let (event, device) = try Self.registration(caregiver: caregiver)
        let run = try Executables.run("push-register", input: event, environment: Self.lambdaEnvironment(fake))
        #expect(run.response?.statusCode == 200)
        let devices = try TestDatabase.with { try Seed.devices($0, token: device) }
        #expect(devices.first?.ownerID == caregiver)
        let requests = try fake.requests()
        #expect(requests.count == 2 && requests.allSatisfy { $0.tokenMatched && $0.status == 200 })
        #expect(!run.stderr.contains(testJWTSecret))
    }

    @Test("an unknown secret: a 500 problem, the log names DATABASE_SECRET_ARN, nothing is written")
    func unknownSecret() throws {
        let fake = try SecretsExtensionFake(secrets: [Self.jwtARN: testJWTSecret])
        let (event, device) = try Self.registration(caregiver: UUID())
        let run = try Executables.run("push-register", input: event, environment: Self.lambdaEnvironment(fake))
        #expect(run.response?.statusCode == 500)
        #expect(run.response?.headers["content-type"] == "application/problem+json")
        #expect(run.stderr.contains("DATABASE_SECRET_ARN") && run.stderr.contains("ResourceNotFoundException"))
        #expect(try TestDatabase.with { try Seed.devices($0, token: device) }.isEmpty)
        #expect(try fake.requests().contains { $0.status == 400 })
    }

    @Test("a wrong session token: the extension refuses (401), the function answers 500 naming the variable")
    func wrongSessionToken() throws {
        let fake = try SecretsExtensionFake(secrets: [
            Self.databaseARN: try Self.rdsSecret(), Self.jwtARN: testJWTSecret,
        ])
        let (event, _) = try Self.registration(caregiver: UUID())
        let run = try Executables.run(
            "push-register", input: event,
            environment: Self.lambdaEnvironment(fake, ["AWS_SESSION_TOKEN": "not-this-sandbox's-token"]))
        #expect(run.response?.statusCode == 500)
        #expect(run.stderr.contains("DATABASE_SECRET_ARN") && run.stderr.contains("HTTP 401"))
        #expect(try fake.requests().allSatisfy { !$0.tokenMatched && $0.status == 401 })
        #expect(!run.stderr.contains(fake.sessionToken))
    }

    @Test("an extension still starting: the function asks again until it is ready")
    func notYetReady() throws {
        let fake = try SecretsExtensionFake(
            secrets: [Self.databaseARN: try Self.rdsSecret(), Self.jwtARN: testJWTSecret], notReadySeconds: 0.8)
        let (event, _) = try Self.registration(caregiver: UUID())
        let run = try Executables.run("push-register", input: event, environment: Self.lambdaEnvironment(fake))
        #expect(run.response?.statusCode == 200)
        let statuses = try fake.requests().map(\.status)
        #expect(statuses.first == 400 && statuses.last == 200)
    }

    @Test("a rotated JWT secret is picked up by a warm worker within the cache time, without a restart")
    func rotation() throws {
        let oldSecret = testJWTSecret
        let newSecret = "rotated-secret-with-at-least-32-characters-\(UUID().uuidString)"
        let fake = try SecretsExtensionFake(
            secrets: [Self.databaseARN: try Self.rdsSecret(), Self.jwtARN: oldSecret], ttlSeconds: 1)
        _ = TestDatabase.migrated
        let server = try Self.warmServer(fake)
        func register(with secret: String) throws -> Int { try Self.register(on: server, secret: secret) }
        #expect(try register(with: oldSecret) == 200)
        #expect(try register(with: newSecret) == 401)
        try fake.store([Self.databaseARN: try Self.rdsSecret(), Self.jwtARN: newSecret])
        var accepted = false
        for _ in 0..<40 where !accepted {
            Thread.sleep(forTimeInterval: 0.25)
            accepted = try register(with: newSecret) == 200
        }
        #expect(accepted, "the rotated secret was not used within 10 s (cache 1 s, refresh 1 s)")
        #expect(try register(with: oldSecret) == 401)
    }

    @Test("a deleted secret: a warm worker keeps the last value for the grace, then answers 500 naming the variable")
    func deletedSecretFailsClosed() throws {
        let fake = try SecretsExtensionFake(
            secrets: [Self.databaseARN: try Self.rdsSecret(), Self.jwtARN: testJWTSecret], ttlSeconds: 0.5)
        _ = TestDatabase.migrated
        // Refresh every second: a grace of two.
        let server = try Self.warmServer(fake)
        func register() throws -> Int { try Self.register(on: server, secret: testJWTSecret) }
        #expect(try register() == 200)
        try fake.store([Self.databaseARN: try Self.rdsSecret()])
        let deleted = Date()
        var statuses: [(Double, Int)] = []
        while Date().timeIntervalSince(deleted) < 8, statuses.last?.1 != 500 {
            statuses.append((Date().timeIntervalSince(deleted), try register()))
            Thread.sleep(forTimeInterval: 0.25)
        }
        let closedAt = try #require(statuses.first { $0.1 == 500 }?.0, "still served 8 s later: \(statuses)")
        // Never before the grace (two refresh intervals since the last good reading, which was at most 1.5 s before
        // the deletion took effect), and within about three intervals of it.
        #expect(closedAt > 0.4 && closedAt < 6, "\(statuses)")
        #expect(statuses.dropLast().allSatisfy { $0.1 == 200 })
        #expect(server.logs(#""config.variable":"SUPABASE_JWT_SECRET_ARN""#))
        #expect(server.logs("secret not read within its grace: no longer used"))
    }

    @Test("an idle warm worker past the grace reads its secrets before the next request: the rotated one serves it")
    func graceBeforeTheRequest() throws {
        let newSecret = "rotated-after-a-leak-with-at-least-32-characters-\(UUID().uuidString)"
        let fake = try SecretsExtensionFake(
            secrets: [Self.databaseARN: try Self.rdsSecret(), Self.jwtARN: testJWTSecret], ttlSeconds: 0.5)
        _ = TestDatabase.migrated
        // Refresh every second: a grace of two.
        let server = try Self.warmServer(fake)
        func register(with secret: String) throws -> Int { try Self.register(on: server, secret: secret) }
        #expect(try register(with: testJWTSecret) == 200)
        // The secret is rotated after a leak while the worker is idle (as a frozen Lambda environment is): no
        // invocation ends, so no refresh runs after one. Past the grace, the very next request is served by the new
        // secret, and the leaked one is refused.
        try fake.store([Self.databaseARN: try Self.rdsSecret(), Self.jwtARN: newSecret])
        Thread.sleep(forTimeInterval: 3)
        #expect(try register(with: testJWTSecret) == 401)
        #expect(try register(with: newSecret) == 200)
    }

    // MARK: The reading itself

    @Test("the database secret: a URL as it is, RDS JSON with its password percent-encoded, anything else refused")
    func databaseSecretShapes() throws {
        let read = { (values: [String: String]) in
            Configuration.resolvingSecrets(in: ["DATABASE_SECRET_ARN": "arn:db"]) { id in
                values[id].map { .success($0) } ?? .failure(SecretsExtensionError(.refused, status: 400))
            }
        }
        let url = read(["arn:db": "postgresql://u:p@db.example:6543/app?sslmode=verify-full"])
        #expect(url.environment["DATABASE_URL"] == "postgresql://u:p@db.example:6543/app?sslmode=verify-full")
        let json = read([
            "arn:db":
                #"{"engine":"postgres","host":"db.example","port":5432,"username":"app","password":"p@ss/w:rd","dbname":"caregiver"}"#
        ])
        #expect(json.environment["DATABASE_URL"] == "postgresql://app:p%40ss%2Fw%3Ard@db.example:5432/caregiver")
        #expect(json.errors.isEmpty)
        let bad = read(["arn:db": #"{"password":"hunter2-secret"}"#])
        #expect(bad.environment["DATABASE_URL"] == nil)
        #expect(bad.errors.map(\.variable) == ["DATABASE_SECRET_ARN"])
        #expect(!bad.errors.description.contains("hunter2"))
        // A plain DATABASE_URL next to an ARN that cannot be read is not used: the ARN is what the deploy meant.
        let stale = Configuration.resolvingSecrets(in: [
            "DATABASE_SECRET_ARN": "arn:db", "DATABASE_URL": "postgres://x",
        ]) {
            _ in .failure(SecretsExtensionError(.notListening))
        }
        #expect(stale.environment["DATABASE_URL"] == nil)
        var configuration = Configuration(environment: stale.environment)
        configuration.errors += stale.errors
        let error = #expect(throws: ConfigurationError.self) { try configuration.requireFunctionBasics() }
        #expect(error?.variable == "DATABASE_SECRET_ARN")
    }

    @Test("the FCM secret: the key file's JSON is passed on as its base64")
    func fcmSecretShape() {
        let resolved = Configuration.resolvingSecrets(in: ["FCM_SERVICE_ACCOUNT_SECRET_ARN": "arn:fcm"]) { _ in
            .success(#"{"type":"service_account"}"#)
        }
        #expect(
            resolved.environment["FCM_SERVICE_ACCOUNT_JSON"]
                == Base64.encode(Array(#"{"type":"service_account"}"#.utf8)))
    }
}

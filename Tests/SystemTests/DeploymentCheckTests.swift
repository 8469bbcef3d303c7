import CaregiverPush
import Codecs
import Foundation
import Libpq
import Migrations
import OpenSSLCrypto
import ProcessSupervision
import Testing
import TestFixtures
import TestSupport

/// `runner check-deployment` (docs/deploy.md#prove-a-deployment) against a local stack: a cluster of its own (roles
/// are the cluster's, and these cases take the runtime role's login away), PgBouncer in front of it as the functions
/// reach it, the FCM fake. It passes; and each cause the docs list is provoked once, with the one line it prints.
@Suite("proving a deployment: runner check-deployment", .serialized)
struct DeploymentCheckTests {
    /// The local stack: a migrated cluster whose households role can log in, PgBouncer in front, FCM's fake.
    final class Stack {
        let cluster: OwnDatabase
        let pooler: OwnPgBouncer
        let fake: FCMFake
        let caregiver = UUID()
        var extraPoolers: [OwnPgBouncer] = []

        init() throws {
            cluster = try OwnDatabase(port: try freeLocalPort())
            let owner = try PostgresConnection(url: cluster.url)
            defer { owner.close() }
            try owner.query("ALTER ROLE caregiver_push_households LOGIN")
            try owner.query(PostgresQuery(unsafeSQL: "ALTER ROLE \(Migrator.runtimeRole) LOGIN"))
            pooler = try OwnPgBouncer(upstreamPort: cluster.port, poolSize: 2)
            fake = try FCMFake()
        }

        deinit {
            for extra in extraPoolers { extra.remove() }
            pooler.remove()
            cluster.remove()
        }

        /// The functions' environment as deployed (the runtime role through the pooler) and the check's own.
        func environment(_ overrides: [String: String?] = [:]) throws -> [String: String] {
            var values: [String: String?] = [
                "DATABASE_URL": "postgresql://\(Migrator.runtimeRole)@127.0.0.1:\(pooler.port)/caregiver_push",
                "HOUSEHOLDS_DATABASE_URL":
                    "postgresql://caregiver_push_households@127.0.0.1:\(cluster.port)/caregiver_push",
                "CHECK_CAREGIVER_TOKEN": try caregiverToken(caregiver),
            ]
            for (key, value) in overrides { values[key] = value }
            return fake.environment(values)
        }

        struct Outcome {
            let status: Int32
            let stdout: [String]
            let stderr: String
        }

        func check(_ overrides: [String: String?] = [:]) throws -> Outcome {
            let result = try ChildProcess.run(
                executable: Executables.binDirectory.appendingPathComponent("runner"),
                arguments: ["check-deployment"], environment: try environment(overrides), input: Data())
            let outcome = Outcome(
                status: result.exitStatus,
                stdout: String(decoding: result.standardOutput, as: UTF8.self).split(separator: "\n").map(String.init),
                stderr: String(decoding: result.standardError, as: UTF8.self))
            print(
                "DeploymentCheckTests: exit \(outcome.status)\n  "
                    + (outcome.stdout + [outcome.stderr]).joined(separator: "\n  "))
            LeakCapture.record(outcome.stderr, source: "runner check-deployment stderr")
            return outcome
        }

        /// Nothing of a check is left: no household, no enabled device, nothing queued.
        func leftOver() throws -> Int {
            let owner = try PostgresConnection(url: cluster.url)
            defer { owner.close() }
            return try owner.query(
                """
                SELECT (SELECT count(*) FROM caregiver_push.patients WHERE display_name = 'deployment check')
                     + (SELECT count(*) FROM caregiver_push.push_devices
                        WHERE token LIKE 'deployment-check-%' AND is_enabled)
                     + (SELECT count(*) FROM caregiver_push.push_deliveries WHERE status IN ('PENDING', 'SENDING'))
                """
            )[0].decode(Int.self, at: 0)
        }

        func asOwner(_ statement: String) throws {
            let owner = try PostgresConnection(url: cluster.url)
            defer { owner.close() }
            try owner.query(PostgresQuery(unsafeSQL: statement))
        }
    }

    @Test("a deployment that works: every step passes, FCM validates the message and nothing is delivered or left")
    func passes() throws {
        let stack = try Stack()
        let outcome = try stack.check()
        #expect(outcome.status == 0, "\(outcome.stderr)")
        #expect(
            outcome.stdout.map { String($0.prefix { $0 != "(" }) } == [
                "ok  runtime login", "ok  caregiver token ", "ok  throwaway household ", "ok  record a dose",
                "ok  FCM validate-only ", "ok  clean up", "deployment check passed",
            ])
        // The one request FCM saw: the dose's message, to the check's topic, validate-only; no device got anything.
        let requests = try stack.fake.requests()
        #expect(requests.count == 1)
        #expect(requests.first?["validateOnly"] == .bool(true))
        #expect(requests.first?["message"]?["topic"] == .string("caregiver-push-deployment-check"))
        #expect(requests.first?["message"]?["token"] == nil)
        #expect(requests.first?["message"]?["data"]?["type"] == .string("DOSE_TAKEN"))
        #expect(try stack.fake.messages().isEmpty)
        #expect(try stack.leftOver() == 0)
    }

    /// Each listed cause, what provokes it, and the start of the line the check prints.
    static let causes: [(name: String, provoke: @Sendable (Stack) throws -> [String: String?], expected: String)] = [
        (
            "the runtime role without its login",
            { stack in
                try stack.asOwner("ALTER ROLE \(Migrator.runtimeRole) NOLOGIN")
                return ["DATABASE_URL": stack.cluster.runtimeURL]
            },
            "deployment check failed at runtime login: the runtime role caregiver_push_runtime has no login"
        ),
        (
            "the pooler refusing the role",
            { stack in
                // A PgBouncer that knows only `postgres`: the runtime role is not among its users.
                let pooler = try OwnPgBouncer(upstreamPort: stack.cluster.port, poolSize: 2, users: ["postgres"])
                stack.extraPoolers.append(pooler)
                return ["DATABASE_URL": "postgresql://\(Migrator.runtimeRole)@127.0.0.1:\(pooler.port)/caregiver_push"]
            },
            "deployment check failed at runtime login: the pooler refused the role caregiver_push_runtime"
        ),
        (
            "DATABASE_URL with the owner's login",
            { stack in ["DATABASE_URL": stack.cluster.url] },
            "deployment check failed at runtime login: DATABASE_URL logs in as postgres, not caregiver_push_runtime"
        ),
        (
            "a JWT secret that does not verify",
            { _ in ["SUPABASE_JWT_SECRET": String(repeating: "a-different-project-secret-", count: 2)] },
            "deployment check failed at caregiver token: the functions' JWT settings do not verify the token (badSignature)"
        ),
        (
            "FCM refusing the service account",
            { stack in
                // The same account with a key Google never issued: the token exchange is refused.
                let json = try JSONValue.parse(Array(stack.fake.serviceAccountJSON.utf8))
                guard case .object(var members) = json else { return [:] }
                members["private_key"] = .string(try PrivateKey.generateRSA().pemPKCS8())
                let forged = String(decoding: JSONCoding.encode(JSONValue.object(members)) ?? [], as: UTF8.self)
                return ["FCM_SERVICE_ACCOUNT_JSON": Data(forged.utf8).base64EncodedString()]
            },
            "deployment check failed at FCM validate-only: Google refused the service account"
        ),
        (
            "FCM refusing the message: a service account of another project",
            { stack in
                let json = try JSONValue.parse(Array(stack.fake.serviceAccountJSON.utf8))
                guard case .object(var members) = json else { return [:] }
                members["project_id"] = .string("another-project")
                let other = String(decoding: JSONCoding.encode(JSONValue.object(members)) ?? [], as: UTF8.self)
                return ["FCM_SERVICE_ACCOUNT_JSON": Data(other.utf8).base64EncodedString()]
            },
            "deployment check failed at FCM validate-only: FCM refused the message (DISABLED_TOKEN"
        ),
        (
            "no PUSH_ENVIRONMENT", { _ in ["PUSH_ENVIRONMENT": nil] },
            "deployment check failed at FCM validate-only: PUSH_ENVIRONMENT is not DEV or PROD"
        ),
        (
            "the households login refused",
            { stack in
                try stack.asOwner("ALTER ROLE caregiver_push_households NOLOGIN")
                return [:]
            },
            "deployment check failed at throwaway household: the households role has no login"
        ),
        (
            "a database that does not answer",
            { _ in
                ["DATABASE_URL": "postgresql://\(Migrator.runtimeRole)@127.0.0.1:\(try freeLocalPort())/caregiver_push"]
            },
            "deployment check failed at runtime login: cannot connect with DATABASE_URL: connection refused"
        ),
        (
            "no FCM service account", { _ in ["FCM_SERVICE_ACCOUNT_JSON": nil] },
            "deployment check failed at FCM validate-only: no usable FCM service account"
        ),
        (
            "no households login given", { _ in ["HOUSEHOLDS_DATABASE_URL": nil] },
            "deployment check failed at configuration: HOUSEHOLDS_DATABASE_URL is not set"
        ),
    ]

    @Test("each cause fails its step with one line naming it, exit 1, and leaves nothing behind", arguments: 0..<11)
    func failures(index: Int) throws {
        let cause = Self.causes[index]
        let stack = try Stack()
        let overrides = try cause.provoke(stack)
        let outcome = try stack.check(overrides)
        #expect(outcome.status == 1, "\(cause.name)")
        let lines = outcome.stderr.split(separator: "\n")
        #expect(lines.count == 1, "\(cause.name): \(outcome.stderr)")
        #expect(outcome.stderr.hasPrefix(cause.expected), "\(cause.name): \(outcome.stderr)")
        #expect(!outcome.stdout.contains("deployment check passed"))
        // Never a token or a key in what it prints.
        let token = try caregiverToken(stack.caregiver)
        #expect(!outcome.stderr.contains(token.split(separator: ".")[2]))
        #expect(!outcome.stderr.contains("PRIVATE KEY"))
        // What it made before failing is gone again (a delivery FCM refused is final, not queued).
        try stack.asOwner("ALTER ROLE caregiver_push_households LOGIN")
        #expect(try stack.leftOver() == 0, "\(cause.name)")
    }
}

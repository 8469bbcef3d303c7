import Codecs
import ProcessSupervision
import Libpq
import Foundation
import Testing
import TestFixtures
import TestSupport

/// The runtime role's login given by the migrator before traffic (docs/deploy.md#roles): `gateway migrate` with
/// `RUNTIME_DATABASE_URL_FILE` (the Knative Job) and `db-migrate` with the runtime secret (the SAM deploy), against a
/// cluster of the test's own — roles belong to the cluster, and the shared one's runtime role already logs in. Its
/// TCP connections must give a password (scram-sha-256, pg.sh's `PG_PASSWORD_FILE`), as a provider's do, and it logs
/// every statement it receives, so the test sees whether the password ever reached the server.
@Suite("the runtime role's login, given by the migrator", .serialized, .timeLimit(.minutes(3)))
final class RuntimeLoginTests {
    let directory: URL
    let port: Int
    let ownerPassword: String
    /// What a hand-built `ALTER ROLE … PASSWORD '…'` would break on or a careless log would show: a quote, a
    /// backslash, `@`, `/` and a space.
    let runtimePassword = "rt'pw\\ @/" + UUID().uuidString.lowercased()

    init() throws {
        directory = URL(fileURLWithPath: "/tmp/caregiver-push-login-db-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let passwordFile = directory.appendingPathComponent("postgres.password").path
        var found = 0
        for _ in 0..<5 where found == 0 {
            let candidate = Int.random(in: 40_000..<60_000)
            if (try? Self.shell(
                "PG_PASSWORD_FILE='\(passwordFile)' scripts/pg.sh start '\(directory.path)/data' \(candidate)")) != nil
            {
                found = candidate
            }
        }
        port = try #require(found == 0 ? nil : found, "the test's own PostgreSQL did not start")
        ownerPassword = try String(contentsOfFile: passwordFile, encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let owner = try PostgresConnection(url: ownerURL)
        defer { owner.close() }
        try owner.query("ALTER SYSTEM SET log_statement = 'all'")
        try owner.query("SELECT pg_reload_conf()")
    }

    deinit {
        _ = try? Self.shell("scripts/pg.sh stop '\(directory.path)/data'")
        try? FileManager.default.removeItem(at: directory)
    }

    var ownerURL: String { "postgresql://postgres:\(ownerPassword)@127.0.0.1:\(port)/caregiver_push" }

    /// The functions' connection, the password percent-encoded as a URL-form secret holds it.
    var runtimeURL: String {
        let encoded = runtimePassword.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        return "postgresql://caregiver_push_runtime:\(encoded)@127.0.0.1:\(port)/caregiver_push"
    }

    @discardableResult
    static func shell(_ script: String) throws -> String {
        let result = try ChildProcess.run(
            executable: URL(fileURLWithPath: "/bin/sh"),
            arguments: ["-c", "set -e\ncd '\(TestDatabase.repositoryRoot.path)'\n" + script],
            environment: ProcessInfo.processInfo.environment, input: Data())
        guard result.exitStatus == 0 else {
            throw ShellError.failed(String(decoding: result.standardError, as: UTF8.self))
        }
        return String(decoding: result.standardOutput, as: UTF8.self)
    }

    enum ShellError: Error { case failed(String) }

    /// `gateway migrate` as the Knative Job runs it, as the owner; `runtimeFile` is its RUNTIME_DATABASE_URL_FILE.
    func gatewayMigrate(runtimeFile: String?) throws -> Executables.Run {
        var environment = ["DATABASE_URL": ownerURL]
        environment["RUNTIME_DATABASE_URL_FILE"] = runtimeFile
        return try Executables.run(
            "gateway", arguments: ["migrate", "--migrations", TestDatabase.migrationsDirectory.path], input: Data(),
            environment: environment)
    }

    /// push-register once as the runtime role; its status and whether the device was stored.
    func register() throws -> (status: Int?, stored: Bool) {
        let device = makeDeviceToken()
        let event = try Executables.fixture(
            "push-register/valid.json",
            ["CAREGIVER_TOKEN": try caregiverToken(UUID()), "DEVICE_TOKEN": device, "INSTALLATION_ID": "login"])
        let run = try Executables.run(
            "push-register", input: event, environment: testEnvironment(["DATABASE_URL": runtimeURL]))
        let owner = try PostgresConnection(url: ownerURL)
        defer { owner.close() }
        let count = try owner.query("SELECT count(*) FROM caregiver_push.push_devices WHERE token = \(device)")
            .first?.decode(Int.self, at: 0)
        return (run.response?.statusCode, count == 1)
    }

    /// Every place the password could have gone: the server's statement log, and what the role stores.
    func expectPasswordNowhere(_ outputs: [String], sourceLocation: SourceLocation = #_sourceLocation) throws {
        let log = try Self.shell("cat \"$(scripts/pg.sh where '\(directory.path)/data')/server.log\"")
        #expect(log.contains("ALTER ROLE caregiver_push_runtime"), sourceLocation: sourceLocation)
        let encoded = runtimePassword.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let secretPart = String(runtimePassword.suffix(36))
        for text in outputs + [log] {
            #expect(!text.contains(secretPart), "the password reached a log", sourceLocation: sourceLocation)
            #expect(!text.contains(encoded), "the encoded password reached a log", sourceLocation: sourceLocation)
        }
        let owner = try PostgresConnection(url: ownerURL)
        defer { owner.close() }
        let stored = try owner.query(
            "SELECT rolcanlogin, rolpassword FROM pg_catalog.pg_authid WHERE rolname = 'caregiver_push_runtime'")
        #expect(try stored.first?.decode(Bool.self, at: 0) == true, sourceLocation: sourceLocation)
        #expect(
            try stored.first?.decode(String.self, at: 1).hasPrefix("SCRAM-SHA-256$4096:") == true,
            sourceLocation: sourceLocation)
    }

    @Test("gateway migrate: before the login a function answers 503; with RUNTIME_DATABASE_URL_FILE it works")
    func gatewayMigrateGivesLogin() throws {
        let first = try gatewayMigrate(runtimeFile: nil)
        #expect(first.result.exitStatus == 0, "\(first.stderr)")
        // The role exists without LOGIN: every function is refused by the server, and says so as an outage.
        let before = try register()
        #expect(before.status == 503)
        #expect(!before.stored)

        let file = directory.appendingPathComponent("runtime-database-url").path
        try Data((runtimeURL + "\n").utf8).write(to: URL(fileURLWithPath: file))
        let second = try gatewayMigrate(runtimeFile: file)
        #expect(second.result.exitStatus == 0, "\(second.stderr)")
        let after = try register()
        #expect(after.status == 200)
        #expect(after.stored)
        try expectPasswordNowhere([
            second.stderr, String(decoding: second.result.standardOutput, as: UTF8.self),
        ])
    }

    @Test("gateway migrate refuses a runtime connection that is the owner's, before applying anything")
    func ownerURLRefused() throws {
        let file = directory.appendingPathComponent("runtime-database-url").path
        try Data(ownerURL.utf8).write(to: URL(fileURLWithPath: file))
        let run = try gatewayMigrate(runtimeFile: file)
        #expect(run.result.exitStatus != 0)
        #expect(run.stderr.contains("does not log in as caregiver_push_runtime"))
        #expect(!run.stderr.contains(ownerPassword))
        let owner = try PostgresConnection(url: ownerURL)
        defer { owner.close() }
        let migrated = try owner.query("SELECT to_regclass('caregiver_push.schema_migrations') IS NOT NULL")
        #expect(try migrated.first?.decode(Bool.self, at: 0) == false)
    }

    @Test("db-migrate: Create with the runtime secret gives the login before it answers SUCCESS")
    func dbMigrateGivesLogin() throws {
        let fake = try PresignedURLFake()
        let event = DbMigrateTests.request("Create", responseURL: fake.responseURL)
        let run = try DbMigrateTests.run(
            event, via: fake, ["DATABASE_URL": ownerURL, "RUNTIME_DATABASE_URL": runtimeURL])
        let answer = try DbMigrateTests.onlyAnswer(fake, to: event)
        #expect(answer["Status"]?.stringValue == "SUCCESS", "\(run.stderr)")
        let after = try register()
        #expect(after.status == 200)
        #expect(after.stored)
        try expectPasswordNowhere([run.stderr, String(decoding: run.result.standardOutput, as: UTF8.self)])
    }
}

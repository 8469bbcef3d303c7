import Codecs
import Libpq
import CaregiverPush
import Foundation
import Logging
import Testing
import TestSupport

/// `db-migrate`, the CloudFormation custom resource, as CloudFormation drives it: the built executable gets the
/// request, migrates a real PostgreSQL database, and PUTs its answer to a local server standing for the pre-signed
/// S3 `ResponseURL` (``PresignedURLFake``), which refuses what S3 would refuse.
@Suite("db-migrate custom resource")
struct DbMigrateTests {
    static let stackID = "arn:aws:cloudformation:us-east-1:123456789012:stack/caregiver-push-dev/5b4c8a40-0000-11ef"

    /// A database nobody has migrated; dropped at the end of the test (kept under `make test` for the leak scan).
    final class EmptyDatabase {
        let name = "dbmigrate_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let url: String

        init() throws {
            let name = self.name
            try TestDatabase.with { try $0.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)")) }
            var components = URLComponents(string: TestDatabase.url)
            components?.path = "/\(name)"
            url = components?.string ?? TestDatabase.url
        }

        deinit {
            let name = self.name
            _ = try? TestDatabase.with {
                try $0.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"))
            }
        }

        /// The versions recorded in `schema_migrations`; empty when the table does not exist.
        func appliedVersions() throws -> [String] {
            let connection = try PostgresConnection(url: url, applicationName: "caregiver-push-tests")
            defer { connection.close() }
            let exists =
                try connection.query("SELECT to_regclass('schema_migrations') IS NOT NULL")
                .first?.decode(Bool.self, at: 0) ?? false
            guard exists else { return [] }
            return try connection.query("SELECT version FROM schema_migrations ORDER BY version")
                .map { try $0.decode(String.self, at: 0) }
        }
    }

    /// The versions of infra/migrations, in order.
    static let shippedVersions: [String] = {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: TestDatabase.migrationsDirectory.path)) ?? []
        return names.filter { $0.hasSuffix(".up.sql") }.sorted().map { String($0.prefix(6)) }
    }()

    /// A CloudFormation request, as the function's event.
    static func request(
        _ type: String, responseURL: String, physicalResourceID: String? = nil, omitting: Set<String> = []
    ) -> Data {
        var members: [String: JSONValue] = [
            "RequestType": .string(type), "ResponseURL": .string(responseURL), "StackId": .string(stackID),
            "RequestId": .string(UUID().uuidString.lowercased()), "ResourceType": .string("Custom::DatabaseMigrations"),
            "LogicalResourceId": .string("DatabaseMigrations"),
            "ServiceToken": .string("arn:aws:lambda:us-east-1:123456789012:function:caregiver-push-dev-db-migrate"),
            "ResourceProperties": .object(["ServiceToken": .string("arn:aws:lambda:…"), "CodeVersion": .string("3")]),
        ]
        if let physicalResourceID { members["PhysicalResourceId"] = .string(physicalResourceID) }
        if type == "Update" { members["OldResourceProperties"] = .object(["CodeVersion": .string("2")]) }
        for name in omitting { members[name] = nil }
        return (try? JSONEncoder().encode(JSONValue.object(members))) ?? Data()
    }

    static func run(_ event: Data, _ environment: [String: String?]) throws -> Executables.Run {
        try Executables.run(
            "db-migrate", input: event,
            environment: testEnvironment(
                ["MIGRATIONS_DIR": TestDatabase.migrationsDirectory.path].merging(environment) { $1 }))
    }

    /// The one answer the fake received, checked for what every answer must be.
    static func onlyAnswer(
        _ fake: PresignedURLFake, to event: Data, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> JSONValue {
        let received = try fake.requests()
        try #require(received.count == 1, "expected one PUT, got \(received.count)", sourceLocation: sourceLocation)
        let answer = received[0]
        #expect(answer.method == "PUT" && answer.status == 200, sourceLocation: sourceLocation)
        #expect((answer.headers["content-type"] ?? "").isEmpty, sourceLocation: sourceLocation)
        #expect(answer.query.contains("Signature="), sourceLocation: sourceLocation)
        let body = try #require(answer.body, "the PUT's body is not JSON", sourceLocation: sourceLocation)
        let sent = try JSONValue.parse(event)
        for field in ["StackId", "RequestId", "LogicalResourceId"] {
            #expect(body[field] == sent[field], "\(field) not echoed", sourceLocation: sourceLocation)
        }
        #expect(body["PhysicalResourceId"]?.stringValue?.isEmpty == false, sourceLocation: sourceLocation)
        #expect(body["Reason"]?.stringValue?.isEmpty == false, sourceLocation: sourceLocation)
        return body
    }

    @Test("Create migrates an empty database and PUTs SUCCESS; Update then applies nothing and keeps the id")
    func createThenUpdate() throws {
        let database = try EmptyDatabase()
        let fake = try PresignedURLFake()
        let create = Self.request("Create", responseURL: fake.responseURL)
        let run = try Self.run(create, ["DATABASE_URL": database.url])
        #expect(run.result.exitStatus == 0)
        let body = try Self.onlyAnswer(fake, to: create)
        #expect(body["Status"] == .string("SUCCESS"))
        #expect(!Self.shippedVersions.isEmpty)
        #expect(try database.appliedVersions() == Self.shippedVersions)
        #expect(body["Data"]?["Applied"] == .string(Self.shippedVersions.joined(separator: ",")))
        let physicalID = try #require(body["PhysicalResourceId"]?.stringValue)
        // The host (the Runtime API, here stdout) gets a summary: never the URL.
        let summary = try JSONValue.parse(run.result.standardOutput)
        #expect(summary["status"] == .string("SUCCESS") && summary["responded"] == .bool(true))
        #expect(
            !String(decoding: run.result.standardOutput + run.result.standardError, as: UTF8.self).contains(
                "Signature="))

        let updateFake = try PresignedURLFake()
        let update = Self.request("Update", responseURL: updateFake.responseURL, physicalResourceID: physicalID)
        _ = try Self.run(update, ["DATABASE_URL": database.url])
        let updated = try Self.onlyAnswer(updateFake, to: update)
        #expect(updated["Status"] == .string("SUCCESS"))
        #expect(updated["PhysicalResourceId"] == .string(physicalID))
        #expect(updated["Data"]?["Applied"] == .string(""))
        #expect(try database.appliedVersions() == Self.shippedVersions)
    }

    @Test("Delete PUTs SUCCESS with the same id and leaves the database alone, even without DATABASE_URL")
    func deleteKeepsData() throws {
        let database = try EmptyDatabase()
        let fake = try PresignedURLFake()
        _ = try Self.run(Self.request("Create", responseURL: fake.responseURL), ["DATABASE_URL": database.url])
        let physicalID = try #require(try fake.requests().first?.body?["PhysicalResourceId"]?.stringValue)
        for environment: [String: String?] in [["DATABASE_URL": database.url], ["DATABASE_URL": nil]] {
            let deleteFake = try PresignedURLFake()
            let delete = Self.request("Delete", responseURL: deleteFake.responseURL, physicalResourceID: physicalID)
            let run = try Self.run(delete, environment)
            #expect(run.result.exitStatus == 0)
            let body = try Self.onlyAnswer(deleteFake, to: delete)
            #expect(body["Status"] == .string("SUCCESS"))
            #expect(body["PhysicalResourceId"] == .string(physicalID))
        }
        #expect(try database.appliedVersions() == Self.shippedVersions)
    }

    @Test("A failing migration PUTs FAILED with a reason and no secret, and the database is as it was")
    func failingMigration() throws {
        let database = try EmptyDatabase()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("broken-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for file in try FileManager.default.contentsOfDirectory(atPath: TestDatabase.migrationsDirectory.path) {
            try FileManager.default.copyItem(
                at: TestDatabase.migrationsDirectory.appendingPathComponent(file),
                to: directory.appendingPathComponent(file))
        }
        try "CREATE TABLE broken (id int;".write(
            to: directory.appendingPathComponent("999999_broken.up.sql"), atomically: true, encoding: .utf8)
        let fake = try PresignedURLFake()
        let create = Self.request("Create", responseURL: fake.responseURL)
        let run = try Self.run(create, ["DATABASE_URL": database.url, "MIGRATIONS_DIR": directory.path])
        #expect(run.result.exitStatus == 0)
        let body = try Self.onlyAnswer(fake, to: create)
        #expect(body["Status"] == .string("FAILED"))
        let reason = try #require(body["Reason"]?.stringValue)
        #expect(reason.contains("42601"))  // syntax_error: the kind, not the server's text
        #expect(!reason.contains(database.url) && !reason.contains("broken"))
        // One transaction: the good migrations before the broken one were rolled back with it.
        #expect(try database.appliedVersions() == [])
        #expect(run.stderr.contains(#""msg":"migration failed""#))
        #expect(!run.stderr.contains(database.url))
    }

    @Test("An unreachable database PUTs FAILED naming DATABASE_URL, not its value")
    func unreachableDatabase() throws {
        let fake = try PresignedURLFake()
        let url = "postgresql://postgres:hunter2-secret@127.0.0.1:1/caregiver_push"
        let create = Self.request("Create", responseURL: fake.responseURL)
        let run = try Self.run(create, ["DATABASE_URL": url])
        let body = try Self.onlyAnswer(fake, to: create)
        #expect(body["Status"] == .string("FAILED"))
        #expect(body["Reason"]?.stringValue?.contains("DATABASE_URL") == true)
        let everything = String(decoding: run.result.standardOutput + run.result.standardError, as: UTF8.self)
        #expect(!everything.contains("hunter2") && !(body["Reason"]?.stringValue?.contains("hunter2") ?? true))
    }

    @Test("An incomplete request or an unknown RequestType is answered FAILED; no ResponseURL is a 400, no PUT")
    func badRequests() throws {
        let database = try EmptyDatabase()
        let fake = try PresignedURLFake()
        let incomplete = Self.request("Create", responseURL: fake.responseURL, omitting: ["StackId", "RequestId"])
        _ = try Self.run(incomplete, ["DATABASE_URL": database.url])
        let received = try fake.requests()
        try #require(received.count == 1)
        #expect(received[0].body?["Status"] == .string("FAILED"))
        #expect(received[0].body?["Reason"]?.stringValue?.contains("StackId") == true)

        let unknownFake = try PresignedURLFake()
        let unknown = Self.request("Replace", responseURL: unknownFake.responseURL)
        _ = try Self.run(unknown, ["DATABASE_URL": database.url])
        #expect(try Self.onlyAnswer(unknownFake, to: unknown)["Status"] == .string("FAILED"))
        #expect(try database.appliedVersions() == [])

        for event in ["not json", "[]", #"{"RequestType":"Create"}"#, #"{"ResponseURL":"file:///etc/passwd"}"#] {
            let run = try Self.run(Data(event.utf8), ["DATABASE_URL": database.url])
            #expect(run.result.exitStatus == 0)
            let problem = try JSONValue.parse(run.result.standardOutput)
            #expect(problem["status"] == .number(400), "\(event)")
        }
        #expect(try database.appliedVersions() == [])
    }

    @Test("S3 answering 503 SlowDown first: the answer is PUT again until it is taken")
    func retriesThrottledAnswer() throws {
        let database = try EmptyDatabase()
        let fake = try PresignedURLFake(failFirst: 1)
        let run = try Self.run(Self.request("Create", responseURL: fake.responseURL), ["DATABASE_URL": database.url])
        let received = try fake.requests()
        #expect(received.map(\.status) == [503, 200])
        #expect(received.last?.body?["Status"] == .string("SUCCESS"))
        #expect(try JSONValue.parse(run.result.standardOutput)["responded"] == .bool(true))
    }
}

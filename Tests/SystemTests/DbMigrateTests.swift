import Codecs
import Libpq
import CaregiverPush
import Foundation
import Logging
import Synchronization
import Testing
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// `db-migrate`, the CloudFormation custom resource, as CloudFormation drives it: the built executable gets the
/// request, migrates a real PostgreSQL database, and PUTs its answer to the pre-signed S3 `ResponseURL` of its
/// region's response bucket, which a local server stands for (``PresignedURLFake``: reached as the HTTPS proxy, with
/// its own certificate authority) and which refuses what S3 would refuse.
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

    /// Runs the built db-migrate on one event; with `fake`, as deployed in its region with the fake standing for
    /// CloudFormation's bucket (``PresignedURLFake/environment``). `environment` overrides both.
    static func run(
        _ event: Data, via fake: PresignedURLFake? = nil, _ environment: [String: String?]
    ) throws -> Executables.Run {
        var all: [String: String?] = ["MIGRATIONS_DIR": TestDatabase.migrationsDirectory.path]
        all.merge(fake?.environment ?? [:]) { $1 }
        all.merge(environment) { $1 }
        return try Executables.run("db-migrate", input: event, environment: testEnvironment(all))
    }

    /// The one answer the fake received, checked for what every answer must be.
    static func onlyAnswer(
        _ fake: PresignedURLFake, to event: Data, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> JSONValue {
        let received = try fake.requests()
        try #require(received.count == 1, "expected one PUT, got \(received.count)", sourceLocation: sourceLocation)
        let answer = received[0]
        // Through a tunnel to the bucket's host: over TLS, its certificate verified.
        #expect(answer.tunnel == PresignedURLFake.bucketHost + ":443", sourceLocation: sourceLocation)
        #expect(answer.headers["host"] == PresignedURLFake.bucketHost, sourceLocation: sourceLocation)
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
        let run = try Self.run(create, via: fake, ["DATABASE_URL": database.url])
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
        _ = try Self.run(update, via: updateFake, ["DATABASE_URL": database.url])
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
        _ = try Self.run(
            Self.request("Create", responseURL: fake.responseURL), via: fake, ["DATABASE_URL": database.url])
        let physicalID = try #require(try fake.requests().first?.body?["PhysicalResourceId"]?.stringValue)
        for environment: [String: String?] in [["DATABASE_URL": database.url], ["DATABASE_URL": nil]] {
            let deleteFake = try PresignedURLFake()
            let delete = Self.request("Delete", responseURL: deleteFake.responseURL, physicalResourceID: physicalID)
            let run = try Self.run(delete, via: deleteFake, environment)
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
        let directory = try TestDatabase.migrationsDirectory(
            adding: "999999_broken.up.sql", sql: "CREATE TABLE broken (id int;")
        defer { try? FileManager.default.removeItem(at: directory) }
        let fake = try PresignedURLFake()
        let create = Self.request("Create", responseURL: fake.responseURL)
        let run = try Self.run(create, via: fake, ["DATABASE_URL": database.url, "MIGRATIONS_DIR": directory.path])
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
        let run = try Self.run(create, via: fake, ["DATABASE_URL": url])
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
        _ = try Self.run(incomplete, via: fake, ["DATABASE_URL": database.url])
        let received = try fake.requests()
        try #require(received.count == 1)
        #expect(received[0].body?["Status"] == .string("FAILED"))
        #expect(received[0].body?["Reason"]?.stringValue?.contains("StackId") == true)

        let unknownFake = try PresignedURLFake()
        let unknown = Self.request("Replace", responseURL: unknownFake.responseURL)
        _ = try Self.run(unknown, via: unknownFake, ["DATABASE_URL": database.url])
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
        let run = try Self.run(
            Self.request("Create", responseURL: fake.responseURL), via: fake, ["DATABASE_URL": database.url])
        let received = try fake.requests()
        #expect(received.map(\.status) == [503, 200])
        #expect(received.last?.body?["Status"] == .string("SUCCESS"))
        #expect(try JSONValue.parse(run.result.standardOutput)["responded"] == .bool(true))
    }

    // MARK: Bounded on both sides

    /// A local Runtime API that hands out one event with `Lambda-Runtime-Deadline-Ms` `deadlineMs` from now, writes
    /// that deadline (epoch ms) to the file named by its second argument + ".deadline", appends each answer to that
    /// file, and holds `next` afterwards.
    static let oneEventRuntimeAPI = #"""
        import http.server, sys, threading, time, uuid
        port_file, answers_file, event_file, deadline_ms = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
        events = [open(event_file, "rb").read()]
        lock = threading.Lock()
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def log_message(self, *args):
                pass
            def do_GET(self):
                with lock:
                    event = events.pop(0) if events else None
                if event is None:
                    time.sleep(3600)
                    return
                deadline = int(time.time() * 1000) + deadline_ms
                open(answers_file + ".deadline", "w").write(str(deadline))
                self.send_response(200)
                self.send_header("Lambda-Runtime-Aws-Request-Id", str(uuid.uuid4()))
                self.send_header("Lambda-Runtime-Deadline-Ms", str(deadline))
                self.send_header("Content-Length", str(len(event)))
                self.end_headers()
                self.wfile.write(event)
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with lock, open(answers_file, "ab") as answers:
                    answers.write(body + b"\n")
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        open(port_file + ".tmp", "w").write(str(server.server_address[1]))
        import os
        os.rename(port_file + ".tmp", port_file)
        server.serve_forever()
        """#

    /// Runs db-migrate as a Lambda custom runtime on one event whose deadline is `deadlineSeconds` away; returns the
    /// deadline (epoch seconds) once the S3 stand-in got an answer, or when `waitSeconds` have passed.
    static func runOnRuntimeAPI(
        _ event: Data, deadlineSeconds: Int, environment: [String: String], fake: PresignedURLFake,
        waitSeconds: Double
    ) throws -> Double {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rapi-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let eventFile = directory.appendingPathComponent("event.json")
        try event.write(to: eventFile)
        let portFile = directory.appendingPathComponent("port").path
        let answersFile = directory.appendingPathComponent("answers").path
        let api = Process()
        api.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        api.arguments = [
            "python3", "-c", oneEventRuntimeAPI, portFile, answersFile, eventFile.path, String(deadlineSeconds * 1000),
        ]
        api.standardInput = FileHandle.nullDevice
        api.standardOutput = FileHandle.nullDevice
        try api.run()
        defer {
            kill(api.processIdentifier, SIGKILL)
            api.waitUntilExit()
        }
        for _ in 0..<200 where !FileManager.default.fileExists(atPath: portFile) { Thread.sleep(forTimeInterval: 0.05) }
        let port = try #require((try? String(contentsOfFile: portFile, encoding: .utf8)).flatMap { Int($0) })
        var all = testEnvironment(["MIGRATIONS_DIR": TestDatabase.migrationsDirectory.path])
        all.merge(fake.environment) { $1 }
        all.merge(environment) { $1 }
        let worker = try RuntimeAPIWorker("db-migrate", port: port, environment: all)
        defer { worker.stop() }
        let started = Date()
        while Date().timeIntervalSince(started) < waitSeconds, (try fake.requests()).isEmpty {
            Thread.sleep(forTimeInterval: 0.1)
        }
        let deadline = try #require(
            (try? String(contentsOfFile: answersFile + ".deadline", encoding: .utf8)).flatMap { Double($0) })
        return deadline / 1000
    }

    /// A database nobody had migrated, migrated by db-migrate's Create.
    static func migratedDatabase(sourceLocation: SourceLocation = #_sourceLocation) throws -> EmptyDatabase {
        let database = try EmptyDatabase()
        let fake = try PresignedURLFake()
        _ = try run(request("Create", responseURL: fake.responseURL), via: fake, ["DATABASE_URL": database.url])
        #expect(try database.appliedVersions() == shippedVersions, sourceLocation: sourceLocation)
        return database
    }

    /// A session of its own on `url`, inside a transaction that ran `statement` and holds its locks until the
    /// session commits or closes.
    static func openTransaction(on url: String, _ statement: PostgresQuery) throws -> PostgresConnection {
        let session = try PostgresConnection(url: url, applicationName: "caregiver-push-tests")
        try session.query("BEGIN")
        try session.query(statement)
        return session
    }

    /// A session that holds the migrator's advisory lock (the still-open session of a run that was killed).
    static func holdMigratorLock(_ url: String) throws -> PostgresConnection {
        let holder = try PostgresConnection(url: url, applicationName: "caregiver-push-tests")
        try holder.query("SELECT pg_advisory_lock(7301202611)")
        return holder
    }

    @Test(
        "a lock held elsewhere: db-migrate answers FAILED naming the lock wait, before the invocation's deadline",
        // A guard against a hang only (the deadline is asserted inside): under the parallel suites on two cores a
        // blocking test can wait minutes for a thread after its clock starts (254 s seen once).
        .timeLimit(.minutes(6)))
    func heldLockAnswersBeforeDeadline() throws {
        let database = try EmptyDatabase()
        let holder = try Self.holdMigratorLock(database.url)
        defer { holder.close() }
        let fake = try PresignedURLFake()
        let create = Self.request("Create", responseURL: fake.responseURL)
        // 25 s: the function keeps 12 s for its answer, so the migration has 13 s — two 5 s lock waits and a pause.
        let deadline = try Self.runOnRuntimeAPI(
            create, deadlineSeconds: 25, environment: ["DATABASE_URL": database.url], fake: fake, waitSeconds: 40)
        let body = try Self.onlyAnswer(fake, to: create)
        #expect(body["Status"] == .string("FAILED"))
        let reason = try #require(body["Reason"]?.stringValue)
        #expect(reason.contains("55P03") && reason.contains("lock"), "\(reason)")
        let answeredAt = try #require(try fake.arrivals().first)
        #expect(answeredAt < deadline - 1, "answered \(answeredAt - deadline) s after the deadline")
        #expect(try database.appliedVersions() == [])
    }

    @Test(
        "the database goes silent mid-migration (a relay drops everything, acknowledging): FAILED within the reserve",
        .timeLimit(.minutes(6)))  // a hang guard, as above; the reserve is asserted inside
    func silentDatabaseAnswersWithinReserve() throws {
        let database = try Self.migratedDatabase()
        let relay = try SilentRelay(port: try #require(URLComponents(string: database.url)?.port))
        // The migration reaches the database through the relay and waits for the history's lock, held here.
        let holder = try Self.openTransaction(
            on: database.url, "LOCK TABLE caregiver_push.schema_migrations IN ACCESS EXCLUSIVE MODE")
        defer { holder.close() }
        let fake = try PresignedURLFake()
        let update = Self.request("Update", responseURL: fake.responseURL, physicalResourceID: "x")
        let deadline = Mutex<Double?>(nil)
        let relayed = relay.relaying(database.url)
        let invocation = Thread {
            // 40 s: 28 s for the migration (time to start under a loaded suite), 12 s kept for the answer.
            let at = try? Self.runOnRuntimeAPI(
                update, deadlineSeconds: 40, environment: ["DATABASE_URL": relayed], fake: fake,
                waitSeconds: 60)
            deadline.withLock { $0 = at ?? -1 }
        }
        invocation.start()
        // Watched from a connection of its own: in the holder's transaction, pg_stat_activity would stay as it
        // was when the transaction first read it.
        let watcher = try PostgresConnection(url: database.url, applicationName: "caregiver-push-tests")
        defer { watcher.close() }
        var waiting = false
        let asked = Date()
        while !waiting, Date().timeIntervalSince(asked) < 20 {
            Thread.sleep(forTimeInterval: 0.05)
            waiting =
                try watcher.query(
                    """
                    SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                    WHERE NOT l.granted AND a.application_name = 'caregiver-push-db-migrate'
                      AND a.datname = \(database.name)
                    """
                )[0].decode(Int.self, at: 0) > 0
        }
        try #require(waiting, "the migration never waited for the lock")
        // Silence, then the lock is free: the server goes on and answers, and the answer is lost on the way.
        try relay.goSilent()
        try holder.query("COMMIT")
        while deadline.withLock({ $0 }) == nil { Thread.sleep(forTimeInterval: 0.1) }
        let invocationDeadline = try #require(deadline.withLock { $0 })
        let body = try Self.onlyAnswer(fake, to: update)
        #expect(body["Status"] == .string("FAILED"))
        let reason = try #require(body["Reason"]?.stringValue)
        #expect(reason.contains("stopped answering"), "\(reason)")
        let answeredAt = try #require(try fake.arrivals().first)
        #expect(answeredAt < invocationDeadline - 5, "answered \(answeredAt - invocationDeadline) s after the deadline")
    }

    @Test(
        "one-shot, a table lock held by a running transaction: FAILED after three bounded lock waits",
        .timeLimit(.minutes(3)))
    func heldTableLockOneShot() throws {
        let database = try Self.migratedDatabase()
        // A new migration that alters a table a long transaction is reading.
        let directory = try TestDatabase.migrationsDirectory(
            adding: "999999_alter.up.sql", sql: "ALTER TABLE push_devices ADD COLUMN lock_probe int;")
        defer { try? FileManager.default.removeItem(at: directory) }
        let reader = try Self.openTransaction(on: database.url, "SELECT count(*) FROM push_devices")
        defer { reader.close() }
        let fake = try PresignedURLFake()
        let update = Self.request("Update", responseURL: fake.responseURL, physicalResourceID: "x")
        let run = try Self.run(update, via: fake, ["DATABASE_URL": database.url, "MIGRATIONS_DIR": directory.path])
        try reader.query("COMMIT")
        let body = try Self.onlyAnswer(fake, to: update)
        #expect(body["Status"] == .string("FAILED"))
        #expect(body["Reason"]?.stringValue?.contains("55P03") == true)
        // Three lock waits and no more: the first two are tried again, the third is the answer.
        let retries = run.stderr.split(separator: "\n").filter {
            $0.contains("waited too long for a lock; trying again")
        }
        #expect(retries.count == 2, "\(retries)")
        #expect(try database.appliedVersions() == Self.shippedVersions)
    }

    @Test("a ResponseURL that is not CloudFormation's S3: a 400, nothing run, nothing sent")
    func responseURLAllowList() throws {
        let database = try EmptyDatabase()
        let fake = try PresignedURLFake()
        let urls = [
            "http://127.0.0.1:\(fake.port)/x?Signature=x",  // the stand-in itself, as a local address
            "https://169.254.169.254/latest/meta-data/?Signature=x",
            "http://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/x?Signature=x",
            "https://cloudformation-custom-resource-response-useast1.s3.amazonaws.com.evil.example/x?Signature=x",
            "https://user@cloudformation-custom-resource-response-useast1.s3.amazonaws.com/x?Signature=x",
            "https://cloudformation-custom-resource-response-useast1.s3.amazonaws.com:8443/x?Signature=x",
            "https://cloudformation-custom-resource-response-us-east-1.evil.example/x?Signature=x",
            // Another region's bucket (anyone may have created it), or this region's bucket on another region's host.
            "https://cloudformation-custom-resource-response-euwest1.s3.amazonaws.com/x?Signature=x",
            "https://cloudformation-custom-resource-response-useast2.s3.us-east-2.amazonaws.com/x?Signature=x",
            "https://cloudformation-custom-resource-response-useast1.s3.eu-west-1.amazonaws.com/x?Signature=x",
            "https://cloudformation-custom-resource-response-useast1.s3-eu-west-1.amazonaws.com/x?Signature=x",
        ]
        for url in urls {
            // In us-east-1, the stand-in as the proxy: whatever were sent would reach it.
            let run = try Self.run(Self.request("Create", responseURL: url), via: fake, ["DATABASE_URL": database.url])
            #expect(try JSONValue.parse(run.result.standardOutput)["status"] == .number(400), "\(url)")
        }
        #expect(try fake.requests().isEmpty)
        #expect(try database.appliedVersions() == [])
    }

    @Test("a URL-form secret whose password holds a raw @ or /: no fragment of it in any log line or answer")
    func passwordFragmentsStayOutOfLogs() throws {
        for url in [
            "postgresql://postgres:hunter2@frag/ment-secret@127.0.0.1:1/caregiver_push",
            "postgresql://postgres:hunter2@fragment-secret@127.0.0.1:1/caregiver_push",
            "postgresql://postgres:hunter2/fragment-secret@127.0.0.1:1/caregiver_push",
        ] {
            let fake = try PresignedURLFake()
            let create = Self.request("Create", responseURL: fake.responseURL)
            let run = try Self.run(create, via: fake, ["DATABASE_URL": url])
            let body = try Self.onlyAnswer(fake, to: create)
            #expect(body["Status"] == .string("FAILED"))
            let everything =
                String(decoding: run.result.standardOutput + run.result.standardError, as: UTF8.self)
                + (body["Reason"]?.stringValue ?? "")
            for fragment in ["hunter2", "frag", "ment-secret", "fragment"] {
                #expect(!everything.contains(fragment), "\(fragment) in the output for \(url): \(everything)")
            }
        }
    }
}

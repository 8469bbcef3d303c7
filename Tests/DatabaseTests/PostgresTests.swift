@testable import Libpq
@testable import Migrations
@testable import CaregiverPush
import Foundation
import Logging
import Synchronization
import Testing
import TestSupport

@Suite("Postgres layer over libpq")
struct PostgresTests {
    @Test("interpolated values become binds, never SQL text")
    func interpolationBinds() {
        let hostile = "x'; DROP TABLE patients; --"
        let id = UUID()
        let query: PostgresQuery = "SELECT \(hostile), \(id), \(42), \(Optional<String>.none)"
        #expect(query.sql == "SELECT $1, $2, $3, $4")
        #expect(query.binds == [hostile, id.uuidString.lowercased(), "42", nil])
    }

    @Test("a hostile string round-trips as data")
    func hostileRoundTrip() throws {
        let hostile = "x'; DROP TABLE patients; -- 山田 \\ \" $1"
        let echoed = try TestDatabase.with { try $0.query("SELECT \(hostile)::text")[0].decode(String.self, at: 0) }
        #expect(echoed == hostile)
    }

    @Test("typed rows decode uuid, bool, timestamptz, bytea and NULL")
    func typedRows() throws {
        let id = UUID()
        let bytes = PostgresBytes([0, 1, 0xAB, 0xFF])
        let instant = Date(timeIntervalSince1970: 1_770_764_400.123456)
        let row = try TestDatabase.with {
            try $0.query("SELECT \(id)::uuid, true, \(instant)::timestamptz, \(bytes)::bytea, NULL::text, 7")[0]
        }
        let (decodedID, flag, date, decodedBytes) = try row.decode((UUID, Bool, Date, PostgresBytes).self)
        #expect(decodedID == id && flag && decodedBytes == bytes)
        #expect(abs(date.timeIntervalSince(instant)) < 0.000_001)
        #expect(try row.decode(String?.self, at: 4) == nil)
        #expect(try row.decode(Int.self, at: 5) == 7)
        #expect(throws: PostgresError.self) { _ = try row.decode(String.self, at: 4) }
    }

    @Test("a server error carries its SQLSTATE, and its description hides the message")
    func serverErrorCarriesSQLState() throws {
        try TestDatabase.with { connection in
            let patient = try Seed.patient(connection)
            do {
                try connection.query("INSERT INTO patients (id, display_name) VALUES (\(patient), 'secret-name')")
                Issue.record("expected a unique violation")
            } catch let error as PostgresError {
                #expect(error.code == .server)
                #expect(error.sqlState == .uniqueViolation)
                #expect(!error.description.contains("secret-name") && !error.description.contains("patients"))
                #expect(error.isUnavailable == false)
            }
        }
    }

    @Test("a transaction that throws is rolled back")
    func rollback() throws {
        struct Abort: Error {}
        try TestDatabase.with { connection in
            let name = "rollback-\(UUID().uuidString.prefix(8))"
            #expect(throws: Abort.self) {
                try connection.withTransaction { connection in
                    try connection.query("INSERT INTO patients (display_name) VALUES (\(name))")
                    throw Abort()
                }
            }
            let rows = try connection.query("SELECT 1 FROM patients WHERE display_name = \(name)")
            #expect(rows.isEmpty)
        }
    }

    @Test("an unreachable server is connectionFailed, which counts as unavailable")
    func unreachable() {
        #expect {
            try PostgresConnection(url: "postgresql://postgres@127.0.0.1:1/x?connect_timeout=2")
        } throws: { error in
            (error as? PostgresError)?.code == .connectionFailed && (error as? PostgresError)?.isUnavailable == true
        }
    }

    /// Ends the backend serving `connection` and waits until it has exited, so its goodbye is on the socket.
    private func terminateBackend(of connection: PostgresConnection) throws {
        let pid = try connection.query("SELECT pg_backend_pid()")[0].decode(Int.self, at: 0)
        try TestDatabase.with { admin in
            _ = try admin.query("SELECT pg_terminate_backend(\(pid))")
            for _ in 0..<200 {
                if try admin.query("SELECT 1 FROM pg_stat_activity WHERE pid = \(pid)").isEmpty { return }
                usleep(10_000)
            }
            Issue.record("backend \(pid) still running 2 s after pg_terminate_backend")
        }
    }

    @Test("a query on a terminated backend is connectionLost, which counts as unavailable")
    func connectionLost() throws {
        let connection = try PostgresConnection(url: TestDatabase.url)
        defer { connection.close() }
        try terminateBackend(of: connection)
        #expect {
            try connection.query("SELECT 1")
        } throws: { error in
            (error as? PostgresError)?.code == .connectionLost && (error as? PostgresError)?.isUnavailable == true
        }
    }

    @Test("a warm session notices its backend was terminated and reconnects before the next query")
    func sessionReconnects() throws {
        let session = DatabaseSession(url: TestDatabase.url)
        defer { session.close() }
        let first = try session.connection()
        let firstPID = try first.query("SELECT pg_backend_pid()")[0].decode(Int.self, at: 0)
        try terminateBackend(of: first)
        // The backend leaves pg_stat_activity a moment before its process exits and the socket closes; isOpen
        // must report the close once it is on the socket.
        var noticed = false
        for _ in 0..<200 where !noticed {
            noticed = !first.isOpen
            if !noticed { usleep(10_000) }
        }
        #expect(noticed, "isOpen still true 2 s after the backend was terminated")
        let second = try session.connection()
        #expect(second !== first)
        let secondPID = try second.query("SELECT pg_backend_pid()")[0].decode(Int.self, at: 0)
        #expect(secondPID != firstPID)
    }

    @Test("the runtime role cannot hold up a migration: the advisory key is no longer the lock, the history is")
    func runtimeRoleCannotBlockMigrations() throws {
        _ = TestDatabase.migrated
        let runtime = try PostgresConnection(url: TestDatabase.runtimeURL)
        defer { runtime.close() }
        // What any login can do: take the advisory key the migrator used to serialise on, for its session's life.
        try runtime.query("SELECT pg_advisory_lock(7301202611)")
        // What it cannot: lock the history table the migrator now serialises on.
        try runtime.query("BEGIN")
        #expect(throws: PostgresError.self) {
            try runtime.query("LOCK TABLE caregiver_push.schema_migrations IN EXCLUSIVE MODE")
        }
        try runtime.query("ROLLBACK")
        let migrator = try Migrator(directory: TestDatabase.migrationsDirectory)
        // Bounded either way: a migrator that waits on the advisory key is cancelled within seconds. (Not through
        // TestDatabase.with, which migrates before the bounds are set.)
        let connection = try PostgresConnection(url: TestDatabase.url, applicationName: "caregiver-push-tests")
        defer { connection.close() }
        try connection.query("SET lock_timeout = '3s'")
        try connection.query("SET statement_timeout = '5s'")
        #expect(try migrator.migrate(connection, logger: Logger(label: "test")).isEmpty)
    }

    @Test("concurrent migrators apply each migration once and agree on the result")
    func concurrentMigrations() throws {
        // A database of its own: the migrations always make the project's schema, so a fresh one needs a fresh
        // database.
        let name = "migrate_test_\(UUID().uuidString.prefix(8).lowercased())"
        try TestDatabase.with { _ = try $0.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)")) }
        defer {
            _ = try? TestDatabase.with {
                try $0.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"))
            }
        }
        let migrator = try Migrator(directory: TestDatabase.migrationsDirectory)
        var components = try #require(URLComponents(string: TestDatabase.url))
        components.path = "/\(name)"
        let url = try #require(components.string)
        let results = Mutex<[[String]]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            guard let connection = try? PostgresConnection(url: url) else { return }
            defer { connection.close() }
            if let applied = try? migrator.migrate(connection, logger: Logger(label: "test")) {
                results.withLock { $0.append(applied) }
            }
        }
        let all = results.withLock { $0 }
        #expect(all.count == 4)
        #expect(all.flatMap { $0 }.sorted() == migrator.migrations.map(\.version))
        let recorded = try PostgresConnection(url: url)
        defer { recorded.close() }
        #expect(
            try recorded.query("SELECT count(*) FROM caregiver_push.schema_migrations")[0].decode(Int.self, at: 0)
                == migrator.migrations.count)
        #expect(try migrator.migrate(recorded, logger: Logger(label: "test")).isEmpty)
    }
}

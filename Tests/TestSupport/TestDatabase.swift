import Libpq
import Migrations
import CaregiverPush
import Foundation
import TestFixtures
import Logging

/// The real PostgreSQL the test command started (`DATABASE_URL`), migrated once per test process.
///
/// Tests share one database and run in parallel, so each creates its own patients and caregivers with fresh UUIDs
/// and only ever looks at rows it created.
package enum TestDatabase {
    package static var url: String {
        ProcessInfo.processInfo.environment["DATABASE_URL"] ?? "postgresql://postgres@127.0.0.1:25433/caregiver_push"
    }

    package static var repositoryRoot: URL { Repository.root }

    package static let migrationsDirectory = repositoryRoot.appendingPathComponent("infra/migrations")

    /// Migrates the test database once per test process, before anything invokes a function against it, and lets the
    /// runtime role log in (the operator's one step after the first migration: docs/deploy.md#roles; the throwaway
    /// cluster trusts loopback connections, so no password). Once per process: concurrent `ALTER ROLE`s of one role
    /// fail with "tuple concurrently updated".
    package static let migrated: Bool = {
        guard let connection = try? connect() else { return false }
        defer { connection.close() }
        return (try? connection.query(PostgresQuery(unsafeSQL: "ALTER ROLE \(Migrator.runtimeRole) LOGIN"))) != nil
    }()

    /// The test database as the functions reach it: as the runtime role, which holds only the rights their statements
    /// need. The suites run every function with it (``testEnvironment(_:)``); `url` (the cluster's superuser, whose
    /// `search_path` the test cluster pins to the project's schema) seeds and inspects.
    package static var runtimeURL: String { runtimeURL(for: url) }

    /// `databaseURL` with the runtime role as its user (and no password).
    package static func runtimeURL(for databaseURL: String) -> String {
        _ = migrated
        guard var components = URLComponents(string: databaseURL) else { return databaseURL }
        components.user = Migrator.runtimeRole
        components.password = nil
        return components.string ?? databaseURL
    }

    /// A migrated connection. The migrator's advisory lock makes the concurrent first calls safe.
    package static func connect() throws -> PostgresConnection {
        let connection = try PostgresConnection(url: url, applicationName: "caregiver-push-tests")
        try Migrator(directory: migrationsDirectory).migrate(connection, logger: Logger(label: "tests"))
        return connection
    }

    /// Runs `body` with a fresh connection and closes it on every path.
    @discardableResult
    package static func with<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        let connection = try connect()
        defer { connection.close() }
        return try body(connection)
    }
}

/// Rows the tests create directly (patients and medications have no API: docs/behaviour.md#data-model).
package enum Seed {
    /// A device registered through the real registration code.
    package static func registerDevice(
        _ token: String, caregiver: UUID, environment: String = "DEV", connection: PostgresConnection
    )
        throws
    {
        _ = try PushDeviceRegistry(connection: connection).register(
            .init(token: token, platform: .ios, environment: .init(rawValue: environment)!, installationID: nil),
            caregiverID: caregiver)
    }

    @discardableResult
    package static func patient(_ connection: PostgresConnection, displayName: String = "山田花子") throws -> UUID {
        try connection.query("INSERT INTO patients (display_name) VALUES (\(displayName)) RETURNING id")[0]
            .decode(UUID.self, at: 0)
    }

    package static func link(_ connection: PostgresConnection, caregiver: UUID, patient: UUID, revoked: Bool = false)
        throws
    {
        try connection.query(
            """
            INSERT INTO caregiver_patient_links (caregiver_id, patient_id, revoked_at)
            VALUES (\(caregiver), \(patient), \(revoked ? Date() : nil))
            """)
    }

    /// A patient session; returns the token text (the database keeps only its hash).
    package static func session(
        _ connection: PostgresConnection, patient: UUID, expiresIn: TimeInterval = 3600, revoked: Bool = false
    ) throws -> String {
        let token = try PatientSessionToken.generate()
        try connection.query(
            """
            INSERT INTO patient_sessions (patient_id, token_hash, expires_at, revoked_at)
            VALUES (\(patient), \(PostgresBytes(token.hash)), \(Date().addingTimeInterval(expiresIn)),
                    \(revoked ? Date() : nil))
            """)
        return token.text
    }

    package struct Device: Equatable {
        package let ownerID: UUID
        package let token: String
        package let platform: String
        package let environment: String
        package let installationID: String?
        package let isEnabled: Bool
        package let disabledReason: String?
        package let lastSeenAt: Date
    }

    /// Every device row holding `token`, whoever owns it.
    package static func devices(_ connection: PostgresConnection, token: String) throws -> [Device] {
        try connection.query(
            """
            SELECT owner_id, token, platform, environment, installation_id, is_enabled, disabled_reason, last_seen_at
            FROM push_devices WHERE token = \(token) ORDER BY created_at
            """
        ).map { row in
            Device(
                ownerID: try row.decode(UUID.self, at: 0), token: try row.decode(String.self, at: 1),
                platform: try row.decode(String.self, at: 2), environment: try row.decode(String.self, at: 3),
                installationID: try row.decode(String?.self, at: 4), isEnabled: try row.decode(Bool.self, at: 5),
                disabledReason: try row.decode(String?.self, at: 6), lastSeenAt: try row.decode(Date.self, at: 7))
        }
    }

    /// Every device row of one caregiver.
    package static func devices(_ connection: PostgresConnection, owner: UUID) throws -> [Device] {
        let tokens = try connection.query(
            "SELECT token FROM push_devices WHERE owner_id = \(owner) ORDER BY created_at"
        ).map { try $0.decode(String.self, at: 0) }
        return try tokens.flatMap { try devices(connection, token: $0) }.filter { $0.ownerID == owner }
    }
}

/// A device token of the FCM shape, unique per call.
package func makeDeviceToken() -> String {
    "fcm-" + UUID().uuidString.lowercased() + ":APA91b" + String(repeating: "x", count: 40)
}

extension Seed {
    /// A medication with schedule times (`HH:mm`, Tokyo wall clock). Its name is health data: tests check it
    /// never leaves the database.
    @discardableResult
    package static func medication(
        _ connection: PostgresConnection, patient: UUID, name: String = "テスト薬", isPRN: Bool = false,
        times: [String] = [], start: String = "2020-01-01", end: String? = nil, archived: Bool = false
    ) throws -> UUID {
        let id = try connection.query(
            """
            INSERT INTO medications (patient_id, name, is_prn, start_date, end_date, archived_at)
            VALUES (\(patient), \(name), \(isPRN), \(start)::date, \(end)::date, \(archived ? Date() : nil))
            RETURNING id
            """
        )[0].decode(UUID.self, at: 0)
        for time in times {
            try connection.query(
                "INSERT INTO medication_schedule_times (medication_id, time_of_day) VALUES (\(id), \(time)::time)")
        }
        return id
    }
}

/// Tokyo dates relative to today, for requests that must not be in the future.
package enum TokyoDay {
    package static func offset(_ days: Int) -> String {
        TokyoClock.dateString(of: Date().addingTimeInterval(TimeInterval(days) * 86_400))
    }

    /// `YYYY-MM-DDTHH:mm:00+09:00`.
    package static func instant(_ date: String, _ time: String) -> String { "\(date)T\(time):00+09:00" }
}

/// A migrated database of its own on the test server, dropped when released (kept under `make test`, whose leak scan
/// reads it).
///
/// For tests of `push-sweep`: a sweep leases every due delivery of its database, so two tests sharing one would send
/// each other's deliveries (to each other's FCM fake) and see each other's counts.
package final class IsolatedDatabase: Sendable {
    package let name: String
    package let url: String

    package init() throws {
        let name = "isolated_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        self.name = name
        try TestDatabase.with { connection in
            // An identifier cannot be a bind; `name` is made of hex digits and `_` only.
            try connection.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
        }
        var components = URLComponents(string: TestDatabase.url)
        components?.path = "/\(name)"
        url = components?.string ?? TestDatabase.url
        try with { _ in }
    }

    /// This database as the functions reach it (``TestDatabase/runtimeURL``).
    package var runtimeURL: String { TestDatabase.runtimeURL(for: url) }

    deinit {
        // Under `make test` the leak scan reads every isolated database at the end (the cluster is thrown away then).
        guard ProcessInfo.processInfo.environment["LEAK_CAPTURE_DIR"] == nil else { return }
        let name = self.name
        _ = try? TestDatabase.with { connection in
            try connection.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"))
        }
    }

    /// A migrated connection to this database.
    package func connect() throws -> PostgresConnection {
        let connection = try PostgresConnection(url: url, applicationName: "caregiver-push-tests")
        try Migrator(directory: TestDatabase.migrationsDirectory).migrate(connection, logger: Logger(label: "tests"))
        return connection
    }

    @discardableResult
    package func with<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        let connection = try connect()
        defer { connection.close() }
        return try body(connection)
    }
}

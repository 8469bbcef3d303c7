import Foundation
import Libpq
import Logging
import Migrations

/// A PostgreSQL cluster of the test's own (`scripts/pg.sh`), for the faults that stop the server: the shared test
/// database must stay up for the suites running in parallel.
package struct OwnDatabase: Sendable {
    package let directory: String
    package let port: Int
    /// The server's `max_connections` (pg.sh's 200 when `nil`).
    package let maxConnections: Int?

    package var url: String { "postgresql://postgres@127.0.0.1:\(port)/caregiver_push" }

    /// - Parameter migrated: `false` leaves the new cluster's database empty (a test that prepares it first).
    package init(port: Int, maxConnections: Int? = nil, migrated: Bool = true) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("own-pg-\(UUID().uuidString)").path
        self.port = port
        self.maxConnections = maxConnections
        start()
        guard migrated else { return }
        let connection = try PostgresConnection(url: url)
        defer { connection.close() }
        try Migrator(directory: TestDatabase.migrationsDirectory).migrate(connection, logger: .init(label: "tests"))
        try connection.query(PostgresQuery(unsafeSQL: "ALTER ROLE \(Migrator.runtimeRole) LOGIN"))
    }

    /// This cluster's database as the functions reach it (``TestDatabase/runtimeURL``).
    package var runtimeURL: String { "postgresql://\(Migrator.runtimeRole)@127.0.0.1:\(port)/caregiver_push" }

    package func start() { Self.pg(["start", directory, "\(port)"], maxConnections: maxConnections) }
    package func stop() { Self.pg(["stop", directory]) }

    package func remove() {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Through `system(3)`, which waits for its child with `waitpid`. (Foundation's `Process` instead waits for a
    /// socket that descendants inherit to close; `pg.sh` now starts the server without it, see `DevStackTests`.)
    private static func pg(_ arguments: [String], maxConnections: Int? = nil) {
        let script = TestDatabase.repositoryRoot.appendingPathComponent("scripts/pg.sh").path
        let limit = maxConnections.map { "PG_MAX_CONNECTIONS=\($0) " } ?? ""
        let command = (["/bin/bash", script] + arguments).map { "'\($0)'" }.joined(separator: " ")
        _ = system(limit + command + " >/dev/null")
    }
}

import Libpq
import FoundationEssentials
import Logging

/// Applies `infra/migrations/NNNNNN_name.up.sql` in order, each once, recording them in `schema_migrations`.
///
/// Everything happens in one transaction holding a transaction-scoped advisory lock, so two migrators started
/// together apply each migration exactly once (the second waits, then finds nothing to do), and a failing migration
/// leaves the database as it was.
public struct Migrator: Sendable {
    /// One migration file.
    public struct Migration: Sendable, Equatable {
        public let version: String
        public let name: String
        public let sql: String
    }

    /// The advisory lock key: an arbitrary constant that only this migrator uses.
    static let lockKey = 7_301_202_611

    public let migrations: [Migration]

    /// Reads the migrations of a directory.
    /// - Throws: when the directory cannot be read or a file name is not `NNNNNN_name.up.sql`.
    public init(directory: URL) throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
            $0.hasSuffix(".up.sql")
        }
        var migrations: [Migration] = []
        for fileName in names.sorted() {
            let stem = fileName.dropLast(".up.sql".count)
            let parts = stem.split(separator: "_", maxSplits: 1)
            guard parts.count == 2, parts[0].count == 6, parts[0].allSatisfy(\.isASCII), Int(parts[0]) != nil else {
                throw MigrationError.badFileName(fileName)
            }
            let sql = try String(contentsOf: directory.appendingPathComponent(fileName), encoding: .utf8)
            migrations.append(Migration(version: String(parts[0]), name: String(parts[1]), sql: sql))
        }
        guard Set(migrations.map(\.version)).count == migrations.count else { throw MigrationError.duplicateVersion }
        self.migrations = migrations
    }

    /// Applies what has not been applied yet.
    /// - Returns: the versions applied by this call, in order.
    @discardableResult
    public func migrate(_ connection: PostgresConnection, logger: Logger) throws -> [String] {
        try connection.withTransaction { connection in
            try connection.query("SELECT pg_advisory_xact_lock(\(Self.lockKey))")
            try connection.query(
                """
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version text PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())
                """)
            let applied = Set(
                try connection.query("SELECT version FROM schema_migrations").map { try $0.decode(String.self, at: 0) })
            var newlyApplied: [String] = []
            for migration in migrations where !applied.contains(migration.version) {
                logger.info(
                    "applying migration",
                    metadata: [
                        "migration.version": .string(migration.version),
                        "migration.name": .string(migration.name),
                    ])
                try connection.executeScript(PostgresQuery(unsafeSQL: migration.sql))
                try connection.query(
                    "INSERT INTO schema_migrations (version, name) VALUES (\(migration.version), \(migration.name))")
                newlyApplied.append(migration.version)
            }
            return newlyApplied
        }
    }
}

public enum MigrationError: Error, CustomStringConvertible {
    case badFileName(String)
    case duplicateVersion

    public var description: String {
        switch self {
        case .badFileName(let name): "migration file \(name) is not named NNNNNN_name.up.sql"
        case .duplicateVersion: "two migration files share a version number"
        }
    }
}

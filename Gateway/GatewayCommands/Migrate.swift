import Libpq
import FunctionRuntime
import Migrations
import ArgumentParser
import Foundation
import Logging

/// `gateway migrate` (and `runner migrate`): applies `infra/migrations` in order, once each; safe to run concurrently
/// and repeatedly. The Knative migrate Job runs it from the image.
package struct Migrate<Root: ParsableCommand>: ParsableCommand {
    package static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: "migrate",
            abstract: "Apply the SQL migrations to DATABASE_URL.",
            discussion: """
                Environment: DATABASE_URL (a libpq URL; `make dev`'s is \
                `PG_PASSWORD_FILE=.data/postgres.password scripts/pg.sh url 25432`). On AWS the db-migrate function does the same \
                at deploy time (docs/deploy.md). RUNTIME_DATABASE_URL_FILE, when set: a file holding the runtime role's \
                connection string (the functions' DATABASE_URL); after migrating, caregiver_push_runtime gets its login \
                with that password (sent as a SCRAM verifier, never as clear text).
                """)
    }

    @Option(help: "The migrations directory.")
    var migrations: String = "infra/migrations"

    @Option(
        help: """
            SQL that maps the household relations onto the app's own tables (docs/deploy.md#bring-your-own-tables); \
            default: app-mapping.sql in the migrations directory, when there is one.
            """)
    var appMapping: String?

    package init() {}

    /// A lock wait of at most 5 s, a statement of at most 4 minutes (the migrate Job has 300 s in all).
    static var bounds: TransactionSettings {
        TransactionSettings(lockTimeoutMilliseconds: 5000, statementTimeoutMilliseconds: 240_000)
    }

    package func run() {
        reportingErrors(root: Root.self) { try start() }
    }

    private func start() throws {
        JSONLogHandler.bootstrap()
        let logger = Logger(label: Root._commandName)
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty else {
            throw ValidationError("DATABASE_URL is not set")
        }
        let login = try runtimeLogin()
        let mapping = try appMapping.map { try String(contentsOf: URL(fileURLWithPath: $0), encoding: .utf8) }
        let migrator = try Migrator(directory: URL(fileURLWithPath: migrations), appMapping: mapping)
        let connection: PostgresConnection
        do {
            connection = try PostgresConnection(url: url, applicationName: "caregiver-push-migrate")
        } catch {
            // Never libpq's text: it repeats what it could not parse of the URL, password fragments included.
            throw ValidationError("cannot connect to DATABASE_URL: \(error.connectionFailureReason)")
        }
        defer { connection.close() }
        // Bounded as db-migrate is (docs/deploy.md, "Migrations on deploy"): DDL waiting for a lock queues every
        // request behind it, so the wait is short and the Job's retry tries again; no statement runs unbounded.
        connection.transactionSettings = Self.bounds
        let applied = try migrator.migrate(connection, logger: logger)
        logger.info("migrations up to date", metadata: ["migration.applied": .stringConvertible(applied.count)])
        try login?.apply(on: connection, logger: logger)
    }

    /// The Knative Job's (`RUNTIME_DATABASE_URL_FILE`, the runtime Secret's `database-url` mounted as a file); `nil`
    /// when the variable is not set. Read before anything is applied.
    private func runtimeLogin() throws -> RuntimeLogin? {
        guard let path = ProcessInfo.processInfo.environment["RUNTIME_DATABASE_URL_FILE"], !path.isEmpty else {
            return nil
        }
        guard let contents = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ValidationError("RUNTIME_DATABASE_URL_FILE names a file that cannot be read")
        }
        do {
            return try RuntimeLogin(runtimeConnection: contents.trimmingCharacters(in: .whitespacesAndNewlines))
        } catch {
            throw ValidationError("RUNTIME_DATABASE_URL_FILE: \(error)")
        }
    }
}

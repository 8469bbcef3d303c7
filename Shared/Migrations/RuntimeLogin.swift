import Libpq
import Logging

/// Gives `caregiver_push_runtime` its login, with the password of the runtime connection the functions use, right
/// after the migrations and before any function takes traffic (docs/deploy.md#roles): `db-migrate` during the
/// deploy (`RUNTIME_DATABASE_SECRET_ARN`), `gateway migrate` in the Knative Job (`RUNTIME_DATABASE_URL_FILE`).
///
/// The migrator's own connection stays the owner's: it only learns the runtime password, which the owner could set
/// itself anyway (it created the role). The clear text never reaches the server: libpq computes the SCRAM-SHA-256
/// verifier here (``PostgresConnection/scramVerifier(password:role:)``) and `ALTER ROLE … PASSWORD` sends that,
/// which PostgreSQL stores as it is, so neither `log_statement` nor `pg_stat_activity` can show the password.
public struct RuntimeLogin: Sendable, CustomStringConvertible {
    /// Why the login cannot be given; safe to log and to answer (never a password or a URL).
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public let description: String

        public init(description: String) {
            self.description = description
        }
    }

    public let role = Migrator.runtimeRole
    private let password: String

    /// - Parameter runtimeConnection: the runtime role's connection string (a libpq URL or key/value string), as the
    ///   functions get it; only its password is kept.
    /// - Throws: ``Failure`` when libpq cannot parse it, it holds no password, or it logs in as another role (the
    ///   owner's secret given by mistake): `caregiver_push_runtime`, or `caregiver_push_runtime.<project-ref>` through
    ///   Supabase's pooler.
    public init(runtimeConnection: String) throws(Failure) {
        guard let credentials = PostgresConnection.credentials(in: runtimeConnection) else {
            throw Failure(description: "the runtime connection string cannot be parsed")
        }
        guard let user = credentials.user, user == role || user.hasPrefix(role + ".") else {
            throw Failure(description: "the runtime connection does not log in as \(role)")
        }
        guard let password = credentials.password, !password.isEmpty else {
            throw Failure(description: "the runtime connection string holds no password")
        }
        self.password = password
    }

    /// Never the password.
    public var description: String { "RuntimeLogin(role: \(role))" }

    /// `ALTER ROLE caregiver_push_runtime WITH LOGIN PASSWORD '<SCRAM verifier>'` in a transaction of its own (under
    /// the connection's ``PostgresConnection/transactionSettings``). Run on every migration, so the role's password is
    /// the secret's: a changed runtime secret is in force after the next migration run.
    /// - Throws: ``PostgresError`` (the owner may not alter the role: SQLSTATE 42501, a role it did not create).
    public func apply(on connection: PostgresConnection, logger: Logger) throws {
        let verifier = try connection.scramVerifier(password: password, role: role)
        // Base64, digits, `$` and `:` only: nothing that could end the literal.
        guard verifier.hasPrefix("SCRAM-SHA-256$"),
            verifier.utf8.allSatisfy({ byte in
                (byte >= 0x30 && byte <= 0x3A) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || [0x24, 0x2B, 0x2D, 0x2F, 0x3D].contains(byte)
            })
        else {
            throw PostgresError(.invalidParameter, serverMessage: "libpq's password verifier has an unexpected form")
        }
        try connection.withTransaction { connection in
            _ = try connection.query(
                PostgresQuery(unsafeSQL: "ALTER ROLE \(role) WITH LOGIN PASSWORD '\(verifier)'"))
        }
        logger.info("runtime role may log in", metadata: ["db.role": .string(role)])
    }
}

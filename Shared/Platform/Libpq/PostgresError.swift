import Codecs
/// A failure talking to PostgreSQL.
///
/// Shaped after postgres-nio's `PSQLError`: a ``Code`` that can grow without breaking callers, the SQLSTATE when
/// the server sent one, and the server's text kept apart. `description` is deliberately generic so that bind values,
/// queries and connection strings never reach a response; the details go to ``debugDescription`` for the log.
public struct PostgresError: Error, CustomStringConvertible, CustomDebugStringConvertible, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String {
            case connectionFailed, connectionLost, server, unexpectedResult, decoding, invalidConnectionString
            case invalidParameter, startupParameterRefused, serverNotVerified, noAnswer
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The server could not be reached or refused the connection.
        public static let connectionFailed = Code(.connectionFailed)
        /// The connection broke during a command.
        public static let connectionLost = Code(.connectionLost)
        /// The server answered the command with an error; see ``PostgresError/sqlState``.
        public static let server = Code(.server)
        /// libpq returned a result status this layer does not handle (e.g. COPY).
        public static let unexpectedResult = Code(.unexpectedResult)
        /// A column could not be decoded into the requested Swift type.
        public static let decoding = Code(.decoding)
        /// The connection string (`DATABASE_URL`) cannot be parsed: a configuration error, not an outage.
        public static let invalidConnectionString = Code(.invalidConnectionString)
        /// A bind value (or the SQL) holds a NUL, which libpq's text protocol would silently cut short. Refused before
        /// anything is sent.
        public static let invalidParameter = Code(.invalidParameter)
        /// The server or a pooler in front of it refused a startup parameter the connection string sets (PgBouncer
        /// answers `unsupported startup parameter: options` to `options=-c …`): a configuration error, not an outage.
        public static let startupParameterRefused = Code(.startupParameterRefused)
        /// The server's TLS certificate did not chain to the connection's `sslrootcert`, did not name the host
        /// (`sslmode=verify-full`), or the root certificate file is missing: a configuration error (or someone in
        /// the middle), never retried as an outage.
        public static let serverNotVerified = Code(.serverNotVerified)
        /// No answer came before the connection's ``PostgresConnection/answerDeadline`` (a silent network, a
        /// failover): the connection was closed without waiting for the server.
        public static let noAnswer = Code(.noAnswer)

        public var description: String { base.rawValue }
    }

    public let code: Code
    /// The five-character SQLSTATE, for server errors.
    public let sqlState: SQLState?
    /// The server's or libpq's message; may name tables, columns, hosts. Log it, never return it.
    public let serverMessage: String?

    public init(_ code: Code, sqlState: SQLState? = nil, serverMessage: String? = nil) {
        self.code = code
        self.sqlState = sqlState
        self.serverMessage = serverMessage
    }

    /// True when the database is unreachable or too busy rather than the request being wrong: worth a 503 and a
    /// retry.
    public var isUnavailable: Bool {
        if code == .connectionFailed || code == .connectionLost || code == .noAnswer { return true }
        guard let sqlState else { return false }
        // Class 08 — connection exception; 57P01..57P03 — admin shutdown, crash shutdown, cannot connect now.
        if sqlState.rawValue.hasPrefix("08") || ["57P01", "57P02", "57P03"].contains(sqlState.rawValue) { return true }
        // 53300 too_many_connections: past max_connections (a proxy that connects lazily reports it on a query).
        if sqlState == .tooManyConnections { return true }
        // A wait past lock_timeout or statement_timeout, or a conflict that outlived its retries.
        return [.lockNotAvailable, .queryCanceled, .serializationFailure, .deadlockDetected].contains(sqlState)
    }

    /// A conflict with a concurrent transaction that the same transaction, run again, may not meet (40001, 40P01),
    /// or a prepared statement a pooler lost (26000, 42P05), which the connection then stops using.
    public var isRetryableConflict: Bool {
        code == .server
            && (sqlState == .serializationFailure || sqlState == .deadlockDetected
                || PostgresConnection.statementsLost.contains(sqlState?.rawValue ?? ""))
    }

    public var description: String { "PostgresError(code: \(code))" }

    /// Why a connection could not be opened, as a fixed text safe to log: libpq's own message repeats what it could
    /// not parse of a URL (a password holding a raw `@` or `/` lands partly in the host name it reports), so it is
    /// never logged as it is, only sorted into one of these kinds.
    public var connectionFailureReason: String {
        let message = (serverMessage ?? "").lowercased()
        let kinds: [(String, String)] = [
            ("connection refused", "connection refused"),
            ("timeout expired", "connection timed out"),
            ("could not translate host name", "host name not resolved"),
            ("password authentication failed", "authentication failed"),
            ("no password supplied", "authentication failed"),
            ("authentication failed", "authentication failed"),
            ("no pg_hba.conf entry", "refused by the server's pg_hba.conf"),
            ("does not exist", "database or role does not exist"),
            ("too many clients", "too many connections"),
            ("the database system is", "server starting up or shutting down"),
            ("certificate", "server certificate not verified"),
            ("ssl", "TLS failed"),
            ("invalid", "connection string not understood"),
            ("unsupported startup parameter", "startup parameter refused"),
        ]
        switch code {
        case .invalidConnectionString: return "connection string not understood"
        case .startupParameterRefused: return "startup parameter refused"
        case .serverNotVerified: return "server certificate not verified"
        default: break
        }
        return kinds.first { message.contains($0.0) }?.1 ?? "connection failed"
    }

    public var debugDescription: String {
        var text = "PostgresError(code: \(code)"
        if let sqlState { text += ", sqlState: \(sqlState.rawValue)" }
        if let serverMessage { text += ", message: \(serverMessage)" }
        return text + ")"
    }
}

/// A PostgreSQL SQLSTATE, with names for the ones this project reacts to.
public struct SQLState: RawRepresentable, Hashable, Sendable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Text a column's type cannot read: for the functions, an id the app's `uuid` column cannot hold.
    public static let invalidTextRepresentation = SQLState(rawValue: "22P02")
    public static let uniqueViolation = SQLState(rawValue: "23505")
    public static let foreignKeyViolation = SQLState(rawValue: "23503")
    public static let checkViolation = SQLState(rawValue: "23514")
    public static let serializationFailure = SQLState(rawValue: "40001")
    public static let deadlockDetected = SQLState(rawValue: "40P01")
    public static let undefinedTable = SQLState(rawValue: "42P01")
    public static let queryCanceled = SQLState(rawValue: "57014")
    public static let lockNotAvailable = SQLState(rawValue: "55P03")
    public static let tooManyConnections = SQLState(rawValue: "53300")
}

import Libpq
import Logging

/// The database connection of a function process: opened on first use, reused by later invocations of a warm
/// process, replaced when it has broken.
public final class DatabaseSession {
    private let url: String?
    private let transactionSettings: TransactionSettings?
    private let preparesStatements: Bool
    private var current: PostgresConnection?

    /// - Parameters:
    ///   - url: `DATABASE_URL`.
    ///   - transactionSettings: the bounds every transaction of the session runs under.
    ///   - preparesStatements: whether its connections prepare their statements by name
    ///     (``PostgresConnection/prepareStatements``).
    public init(url: String?, transactionSettings: TransactionSettings? = nil, preparesStatements: Bool = false) {
        self.url = url
        self.transactionSettings = transactionSettings
        self.preparesStatements = preparesStatements
    }

    /// A session with the configuration's URL, bounds and `DATABASE_PREPARED_STATEMENTS`.
    public convenience init(configuration: Configuration) {
        self.init(
            url: configuration.databaseURL, transactionSettings: configuration.transactionSettings,
            preparesStatements: configuration.preparesStatements)
    }

    /// The open connection, connecting first when there is none or the last one broke.
    /// - Throws: ``ConfigurationError`` when `DATABASE_URL` is missing; ``PostgresError`` when unreachable.
    public func connection() throws -> PostgresConnection {
        if let current, current.isOpen { return current }
        current?.close()
        current = nil
        guard let url else { throw ConfigurationError(variable: "DATABASE_URL", reason: "is not set") }
        let opened = try PostgresConnection(url: url, applicationName: "caregiver-push")
        opened.transactionSettings = transactionSettings
        opened.prepareStatements = preparesStatements
        current = opened
        return opened
    }

    /// Runs `body` in a transaction on the session's connection (retried on a serialization failure or deadlock:
    /// see ``PostgresConnection/withTransaction(logger:_:)``).
    public func withTransaction<T>(logger: Logger? = nil, _ body: (PostgresConnection) throws -> T) throws -> T {
        try connection().withTransaction(logger: logger, body)
    }

    /// Whether the session holds a connection that libpq still considers open.
    public var isOpen: Bool { current?.isOpen ?? false }

    /// Closes the connection (end of process, or after a failure that may have left it unusable).
    public func close() {
        current?.close()
        current = nil
    }
}

/// What a log line says of an error, built in one place: its type, and for a database error libpq's code and the
/// server's SQLSTATE — never its message, which may quote a value the request sent.
enum ErrorMetadata {
    /// `error.type`, and ``database(_:)``'s fields when `error` is a ``PostgresError``.
    static func of(_ error: any Error) -> Logger.Metadata {
        var metadata: Logger.Metadata = ["error.type": .string(String(describing: type(of: error)))]
        if let error = error as? PostgresError {
            metadata.merge(database(error)) { _, database in database }
        }
        return metadata
    }

    /// `db.code`, and `db.sqlstate` when the server sent one.
    static func database(_ error: PostgresError) -> Logger.Metadata {
        var metadata: Logger.Metadata = ["db.code": .string(error.code.description)]
        if let sqlState = error.sqlState { metadata["db.sqlstate"] = .string(sqlState.rawValue) }
        return metadata
    }
}

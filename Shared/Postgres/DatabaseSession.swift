import Logging

/// The database connection of a function process: opened on first use, reused by later invocations of a warm
/// process, replaced when it has broken.
public final class DatabaseSession {
    private let url: String?
    private var current: PostgresConnection?

    public init(url: String?) {
        self.url = url
    }

    /// The open connection, connecting first when there is none or the last one broke.
    /// - Throws: ``ConfigurationError`` when `DATABASE_URL` is missing; ``PostgresError`` when unreachable.
    public func connection() throws -> PostgresConnection {
        if let current, current.isOpen { return current }
        current?.close()
        current = nil
        guard let url else { throw ConfigurationError(variable: "DATABASE_URL", reason: "is not set") }
        let opened = try PostgresConnection(url: url, applicationName: "caregiver-push")
        current = opened
        return opened
    }

    /// Runs `body` in a transaction on the session's connection.
    public func withTransaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        try connection().withTransaction(body)
    }

    /// Closes the connection (end of process, or after a failure that may have left it unusable).
    public func close() {
        current?.close()
        current = nil
    }
}

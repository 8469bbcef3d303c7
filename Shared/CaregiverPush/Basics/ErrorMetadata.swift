import Libpq
import Logging

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

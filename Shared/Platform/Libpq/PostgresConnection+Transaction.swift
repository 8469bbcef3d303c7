import Codecs
import FoundationEssentials

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Logging

/// The bounds a function's transactions run under (see ``PostgresConnection/transactionSettings``).
public struct TransactionSettings: Sendable, Equatable {
    /// `lock_timeout`: the longest wait for a row, table or advisory lock.
    public var lockTimeoutMilliseconds: Int
    /// `statement_timeout`: the longest any one statement may run.
    public var statementTimeoutMilliseconds: Int

    public init(lockTimeoutMilliseconds: Int, statementTimeoutMilliseconds: Int) {
        self.lockTimeoutMilliseconds = lockTimeoutMilliseconds
        self.statementTimeoutMilliseconds = statementTimeoutMilliseconds
    }

    /// `SET LOCAL …` statements (integers only, so nothing is interpolated from outside). They end with the
    /// transaction, so nothing leaks to the next user of a pooled server connection.
    ///
    /// `idle_in_transaction_session_timeout` ends a transaction whose client went quiet (a frozen or stopped
    /// process) so that its locks cannot outlive it for longer than one statement's bound.
    var statements: String { statementList.joined(separator: "; ") }

    /// The same statements one by one, for a pipeline (whose statements are sent one at a time).
    var statementList: [String] {
        [
            "SET LOCAL lock_timeout = \(lockTimeoutMilliseconds)",
            "SET LOCAL statement_timeout = \(statementTimeoutMilliseconds)",
            "SET LOCAL idle_in_transaction_session_timeout = \(statementTimeoutMilliseconds + lockTimeoutMilliseconds)",
        ]
    }
}

extension PostgresConnection {
    /// How many times a transaction is run when it keeps failing with a serialization failure or a deadlock.
    public static let transactionAttempts = 3

    /// Runs `body` inside `BEGIN` … `COMMIT`, rolling back when it throws.
    ///
    /// The transaction begins with ``transactionSettings`` in the same round trip as `BEGIN`. When it fails with a
    /// serialization failure or a deadlock (SQLSTATE 40001, 40P01) — a conflict with a concurrent transaction that a
    /// second run may not meet — it is rolled back and run again, up to ``transactionAttempts`` times in all, after
    /// a short randomised pause; `body` must therefore have no effect outside the database. Then the error is thrown
    /// (a 503 for the caller).
    ///
    /// - Throws: whatever `body` throws (after the rollback), or the ``PostgresError`` of `BEGIN`/`COMMIT`.
    public func withTransaction<T>(logger: Logger? = nil, _ body: (PostgresConnection) throws -> T) throws -> T {
        try retryingConflicts(logger: logger) { try transactionOnce(body) }
    }

    /// Runs `transaction` (one whole attempt: begin, work, commit or roll back) again after a serialization failure
    /// or a deadlock, as ``withTransaction(logger:_:)`` describes.
    func retryingConflicts<T>(logger: Logger?, _ transaction: () throws -> T) throws -> T {
        var attempt = 1
        while true {
            do {
                return try transaction()
            } catch let error as PostgresError where error.isRetryableConflict && attempt < Self.transactionAttempts {
                logger?.warning(
                    "transaction conflict, retrying",
                    metadata: [
                        "db.sqlstate": .string(error.sqlState?.rawValue ?? ""),
                        "db.attempt": .stringConvertible(attempt),
                    ])
                // 10–30 ms, then 20–60 ms: enough for the other transaction to finish, short against any deadline.
                let pause = Double(10 << (attempt - 1)) * Double.random(in: 1...3)
                ThreadSleep.sleep(for: .microseconds(Int(pause * 1000)))
                attempt += 1
            }
        }
    }

    private func transactionOnce<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        if let transactionSettings {
            try executeScript(PostgresQuery(unsafeSQL: "BEGIN; \(transactionSettings.statements)"))
        } else {
            try query("BEGIN")
        }
        let value: T
        do {
            value = try body(self)
        } catch {
            // A failed rollback leaves nothing to do: the transaction dies with the connection.
            _ = try? query("ROLLBACK")
            throw error
        }
        do {
            try query("COMMIT")
        } catch {
            // A failed COMMIT (a deferred serialization failure, say) has ended the transaction already.
            _ = try? query("ROLLBACK")
            throw error
        }
        return value
    }
}

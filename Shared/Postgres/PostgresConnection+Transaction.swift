extension PostgresConnection {
    /// Runs `body` inside `BEGIN` … `COMMIT`, rolling back when it throws.
    ///
    /// - Throws: whatever `body` throws (after the rollback), or the ``PostgresError`` of `BEGIN`/`COMMIT`.
    public func withTransaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        try query("BEGIN")
        let value: T
        do {
            value = try body(self)
        } catch {
            // A failed rollback leaves nothing to do: the transaction dies with the connection.
            _ = try? query("ROLLBACK")
            throw error
        }
        try query("COMMIT")
        return value
    }
}

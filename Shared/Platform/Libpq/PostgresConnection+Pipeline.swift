import CLibpq
import Logging

extension PostgresConnection {
    /// Runs `queries` in order in one round trip: libpq's pipeline mode sends every one of them (each the unnamed
    /// statement, as ``query(_:)`` does), then one Sync, and only then reads the results.
    ///
    /// The server runs them one after another exactly as if each had been sent alone, each with its own snapshot
    /// under READ COMMITTED and its own `statement_timeout`; a statement's parameters therefore cannot depend on an
    /// earlier one's result, but its SQL sees what the earlier ones wrote. The first failure skips the rest. Outside
    /// a transaction block the statements up to the Sync form one implicit transaction; inside one, a failure leaves
    /// the block aborted until `ROLLBACK`.
    ///
    /// Meant for a few statements with small results: the connection blocks, so a pipeline whose queries outgrew
    /// the socket buffers while the server's answers outgrew them the other way would stall.
    ///
    /// Internal: the layers above read a flight's results by name (``PipelinedTransaction/Flight``), not by a
    /// position that shifts with every optional statement.
    ///
    /// - Returns: each query's rows, in order.
    /// - Throws: the first failure's ``PostgresError``, after every result has been read so that the connection
    ///   can be used again; `.connectionLost` (and the connection closed) when the connection broke on the way.
    @discardableResult
    func pipeline(_ queries: [PostgresQuery]) throws(PostgresError) -> [PostgresRows] {
        guard let handle else { throw PostgresError(.connectionLost, serverMessage: "connection closed") }
        // libpq takes C strings: a NUL would end the value early and store something else than was asked.
        for query in queries {
            guard !query.sql.utf8.contains(0), !query.binds.contains(where: { $0?.utf8.contains(0) == true }) else {
                throw PostgresError(.invalidParameter, serverMessage: "a bind value holds a NUL character")
            }
        }
        guard !queries.isEmpty else { return [] }
        guard PQenterPipelineMode(handle) == 1 else {
            throw PostgresError(.unexpectedResult, serverMessage: Self.errorMessage(of: handle))
        }
        roundTrips += 1
        // Each query, after the Parse of a statement this connection prepares now (its result comes first).
        var preparing: [String?] = []
        var parsing: [String: String] = [:]
        preparing.reserveCapacity(queries.count)
        for query in queries {
            var name = prepareStatements && !query.binds.isEmpty ? prepared[query.sql] ?? parsing[query.sql] : nil
            var newName: String?
            if prepareStatements, !query.binds.isEmpty, name == nil, prepared.count < Self.preparedLimit {
                newName = Self.statementName(query.sql)
                parsing[query.sql] = newName
                let parsed = query.sql.withCString { sql in
                    newName!.withCString { PQsendPrepare(handle, $0, sql, Int32(query.binds.count), nil) }
                }
                guard parsed == 1 else { throw abandonPipeline(handle) }
                name = newName
            }
            preparing.append(newName)
            let sent = withOptionalCStringArray(query.binds) { valuePointers in
                if let name {
                    return name.withCString {
                        PQsendQueryPrepared(handle, $0, Int32(query.binds.count), valuePointers, nil, nil, 0)
                    }
                }
                return query.sql.withCString { sql in
                    PQsendQueryParams(handle, sql, Int32(query.binds.count), nil, valuePointers, nil, nil, 0)
                }
            }
            guard sent == 1 else { throw abandonPipeline(handle) }
        }
        guard PQpipelineSync(handle) == 1 else { throw abandonPipeline(handle) }

        var rows: [PostgresRows] = []
        rows.reserveCapacity(queries.count)
        var firstFailure: PostgresError?
        for (query, newName) in zip(queries, preparing) {
            if let newName {
                // The Parse's own result: the name is kept only once the server has it.
                guard let result = PQgetResult(handle) else { throw abandonPipeline(handle) }
                switch PQresultStatus(result) {
                case PGRES_COMMAND_OK:
                    prepared[query.sql] = newName
                    PQclear(result)
                case PGRES_PIPELINE_ABORTED:
                    PQclear(result)
                default:
                    do throws(PostgresError) {
                        _ = try consume(result, connection: handle)
                    } catch {
                        if error.code == .connectionLost { throw abandonPipeline(handle, error) }
                        firstFailure = firstFailure ?? error
                    }
                }
                guard PQgetResult(handle) == nil else { throw abandonPipeline(handle) }
            }
            // Each query's result, then a NULL that ends it.
            guard let result = PQgetResult(handle) else { throw abandonPipeline(handle) }
            if PQresultStatus(result) == PGRES_PIPELINE_ABORTED {
                // Skipped after an earlier failure, which is what is thrown.
                PQclear(result)
                rows.append(PostgresRows(columns: [], rows: [], affectedRows: 0))
            } else {
                do throws(PostgresError) {
                    rows.append(try consume(result, connection: handle))
                } catch {
                    if error.code == .connectionLost { throw abandonPipeline(handle, error) }
                    firstFailure = firstFailure ?? error
                    rows.append(PostgresRows(columns: [], rows: [], affectedRows: 0))
                }
            }
            guard PQgetResult(handle) == nil else { throw abandonPipeline(handle) }
        }
        guard let sync = PQgetResult(handle) else { throw abandonPipeline(handle) }
        let synced = PQresultStatus(sync) == PGRES_PIPELINE_SYNC
        PQclear(sync)
        guard synced, PQexitPipelineMode(handle) == 1 else { throw abandonPipeline(handle) }
        if let firstFailure {
            if prepareStatements, let state = firstFailure.sqlState?.rawValue, Self.statementsLost.contains(state) {
                // A pooler between us and the server moved this session to a server connection that does not have
                // our statements, or has them already: from now on every statement goes unnamed.
                prepareStatements = false
                prepared = [:]
            }
            throw firstFailure
        }
        return rows
    }

    /// `invalid_sql_statement_name` and `duplicate_prepared_statement`: what a server connection answers when a
    /// pooler handed it a Bind or a Parse of a statement prepared on another one.
    static let statementsLost: Set<String> = ["26000", "42P05"]

    /// A prepared statement's name, made from its SQL text alone: two processes that share a server connection
    /// through a pooler never bind one name to two statements, so a name found on the wrong server connection runs
    /// the same SQL (FNV-1a, 64 bits, with the text's length).
    static func statementName(_ sql: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in sql.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return "cp_" + String(repeating: "0", count: 16 - hex.count) + hex + "_\(sql.utf8.count)"
    }

    /// Closes a connection whose pipeline went wrong mid-way (sending failed, the server went away, or libpq
    /// answered out of order): what is left on it cannot be trusted, and a closed connection is replaced by the
    /// next ``DatabaseSession/connection()``.
    private func abandonPipeline(_ handle: OpaquePointer, _ error: PostgresError? = nil) -> PostgresError {
        let error = error ?? PostgresError(.connectionLost, serverMessage: Self.errorMessage(of: handle))
        close()
        return error
    }

    /// Runs `body` in a transaction whose statements travel in as few round trips as `body` allows: each
    /// ``PipelinedTransaction/run(_:)`` is one ``pipeline(_:)``, the first also carrying `BEGIN` and the
    /// ``transactionSettings``. A statement cannot take an earlier statement's result of the same flight as a
    /// parameter, so work whose next statement depends on a result waits for that flight's answer.
    ///
    /// `COMMIT` goes alone, once `body` has returned, as with ``withTransaction(logger:_:)``: sent in one flight with
    /// the writes, it would commit them even when this process died while they waited for a lock (the server reads
    /// the whole flight before it runs any of it), and a request killed before its commit must leave nothing behind.
    /// Read-only work needs no such care: ``readOnlyTransaction(logger:_:)`` sends it with `COMMIT` in one flight.
    ///
    /// Otherwise as ``withTransaction(logger:_:)``: rolled back when `body` throws, run again (whole) after a
    /// serialization failure or deadlock, so `body` must have no effect outside the database. A body that sent
    /// nothing sends nothing.
    public func withPipelinedTransaction<T>(
        logger: Logger? = nil, _ body: (PipelinedTransaction) throws -> T
    ) throws -> T {
        try retryingConflicts(logger: logger) {
            let transaction = PipelinedTransaction(connection: self)
            do {
                let value = try body(transaction)
                if transaction.hasBegun { try query("COMMIT") }
                return value
            } catch {
                rollBackIfOpen()
                throw error
            }
        }
    }

    /// Runs `query` in a read-only transaction (`BEGIN READ ONLY`, the ``transactionSettings``, the query,
    /// `COMMIT`) in one round trip: a read that must run under the settings' bounds, at the price of no round trip
    /// more than the bare statement. Retried as ``withTransaction(logger:_:)`` is.
    /// - Returns: the query's rows.
    public func readOnlyTransaction(logger: Logger? = nil, _ query: PostgresQuery) throws -> PostgresRows {
        try retryingConflicts(logger: logger) {
            let prologue = transactionPrologue(begin: "BEGIN READ ONLY")
            do {
                return try pipeline(prologue + [query, "COMMIT"])[prologue.count]
            } catch {
                rollBackIfOpen()
                throw error
            }
        }
    }

    /// Runs `queries` in one transaction (`BEGIN`, the ``transactionSettings``, the queries, `COMMIT`) in one round
    /// trip: a short write whose statements need nothing from one another's rows. Retried as
    /// ``withTransaction(logger:_:)`` is.
    /// - Returns: the queries' rows, in order.
    public func transaction(logger: Logger? = nil, _ queries: [PostgresQuery]) throws -> [PostgresRows] {
        try retryingConflicts(logger: logger) {
            let prologue = transactionPrologue()
            do {
                return Array(
                    try pipeline(prologue + queries + ["COMMIT"])[prologue.count..<(prologue.count + queries.count)])
            } catch {
                rollBackIfOpen()
                throw error
            }
        }
    }

    /// `begin` and the ``transactionSettings``, as statements of a pipeline.
    fileprivate func transactionPrologue(begin: PostgresQuery = "BEGIN") -> [PostgresQuery] {
        [begin] + (transactionSettings?.statementList ?? []).map { PostgresQuery(unsafeSQL: $0) }
    }

    /// Ends a transaction that a failure left open or aborted. Nothing to do when nothing was sent, or when the
    /// failure was COMMIT's own (which ends the transaction); a failed rollback leaves nothing to do either, the
    /// transaction dies with the connection.
    private func rollBackIfOpen() {
        if let handle, PQtransactionStatus(handle) != PQTRANS_IDLE { _ = try? query("ROLLBACK") }
    }
}

/// One attempt of a ``PostgresConnection/withPipelinedTransaction(logger:_:)``: sends the body's statements in the
/// transaction, a flight at a time. Belongs to that call; not to be kept.
public final class PipelinedTransaction {
    private let connection: PostgresConnection
    private(set) var hasBegun = false
    private var flightsMade = 0

    init(connection: PostgresConnection) {
        self.connection = connection
    }

    /// Runs `queries` in the transaction in one round trip (the first flight also carries `BEGIN` and the settings).
    /// Internal, as ``PostgresConnection/pipeline(_:)`` is: callers send a ``Flight`` and read its results by name.
    /// - Returns: each query's rows, in order.
    @discardableResult
    func run(_ queries: [PostgresQuery]) throws(PostgresError) -> [PostgresRows] {
        let prologue = hasBegun ? [] : connection.transactionPrologue()
        hasBegun = true
        let rows = try connection.pipeline(prologue + queries)
        return Array(rows[prologue.count...])
    }

    /// An empty flight of this transaction: ``Flight/add(_:)-(PostgresQuery)`` its statements, then ``run(_:)-(Flight)``
    /// it and read each statement's rows by the handle `add` returned.
    public func flight() -> Flight {
        flightsMade += 1
        return Flight(number: flightsMade)
    }

    /// Runs `flight`'s statements in the transaction in one round trip, as ``run(_:)-([PostgresQuery])`` does.
    /// - Returns: each statement's rows, by the handle its ``Flight/add(_:)-(PostgresQuery)`` returned.
    @discardableResult
    public func run(_ flight: Flight) throws(PostgresError) -> FlightResults {
        FlightResults(flight: flight.number, rows: try run(flight.queries))
    }

    /// The statements of one round trip, each named by the ``Statement`` handle that adding it returned, so that its
    /// rows are read by that name and not by a position that depends on which optional statements were sent.
    public struct Flight {
        fileprivate let number: Int
        fileprivate private(set) var queries: [PostgresQuery] = []

        fileprivate init(number: Int) {
            self.number = number
        }

        /// Adds `query` to the flight.
        /// - Returns: the handle its rows are read by (discarded for a statement whose rows nobody reads: a lock).
        @discardableResult
        public mutating func add(_ query: PostgresQuery) -> Statement {
            queries.append(query)
            return Statement(flight: number, index: queries.count - 1)
        }

        /// Adds `query` when there is one; nothing is sent for `nil`.
        /// - Returns: the handle its rows are read by, `nil` when nothing was added.
        @discardableResult
        public mutating func add(_ query: PostgresQuery?) -> Statement? {
            query.map { add($0) }
        }
    }

    /// One statement of a ``Flight``.
    public struct Statement: Hashable, Sendable {
        fileprivate let flight: Int
        fileprivate let index: Int
    }

    /// What a ``Flight`` returned, by statement.
    public struct FlightResults {
        fileprivate let flight: Int
        fileprivate let rows: [PostgresRows]

        /// The rows of `statement`, which must belong to the flight these are the results of.
        public subscript(_ statement: Statement) -> PostgresRows {
            precondition(statement.flight == flight, "a statement of another flight")
            return rows[statement.index]
        }

        /// Whether `statement` was sent in this flight.
        public func includes(_ statement: Statement) -> Bool {
            statement.flight == flight
        }

        /// The rows of `statement`, `nil` when it was not sent.
        public subscript(_ statement: Statement?) -> PostgresRows? {
            statement.map { self[$0] }
        }
    }
}

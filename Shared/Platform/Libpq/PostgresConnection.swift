import Codecs
import CLibpq

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One libpq connection. The only place in the project that touches `PGconn` and `PGresult` pointers.
///
/// Blocking by design: a function handles one request at a time, and its work is a few short statements. Not
/// `Sendable`: a connection belongs to the task that opened it. Call ``close()`` when done; `deinit` closes a
/// connection that was forgotten.
public final class PostgresConnection {
    /// Internal only for the other files of this layer (pipeline mode); nothing else touches it.
    private(set) var handle: OpaquePointer?
    /// How many times this connection has sent work and waited for the server's answer (a ``query(_:)``, an
    /// ``executeScript(_:)`` or a ``pipeline(_:)`` each count one): for tests and measurements.
    var roundTrips = 0
    /// Whether ``pipeline(_:)`` sends a statement with parameters as a named prepared statement, parsed and planned
    /// once per connection (the server then keeps a generic plan), instead of the unnamed one each time. Off behind
    /// a pooler that cannot follow named statements across server connections (PgBouncer before 1.21 and Supavisor
    /// in transaction mode): the first statement that finds its name missing (or taken) turns this off for the
    /// connection, and fails with an error ``PostgresError/isRetryableConflict`` counts, so that the transaction runs
    /// again, unnamed.
    public var prepareStatements = false
    /// The statements prepared on this connection: SQL text → name.
    var prepared: [String: String] = [:]
    /// At most this many are kept; a statement past it goes unnamed.
    static let preparedLimit = 256

    /// Opens a connection.
    /// - Parameters:
    ///   - url: a libpq connection URI or key/value string (`DATABASE_URL`). Its own settings win over the defaults
    ///     given here: a 5 s connect timeout, the application name, and ``silenceBounds``.
    ///   - applicationName: shown in `pg_stat_activity`.
    /// - Throws: ``PostgresError`` with code `.connectionFailed`; its `serverMessage` is libpq's text, which may name
    ///   the host and user but never the password.
    public init(url: String, applicationName: String = "caregiver-push") throws(PostgresError) {
        // A string libpq cannot parse is the operator's mistake, not an outage: say so before trying to connect.
        guard Self.isParseable(url) else {
            throw PostgresError(.invalidConnectionString, serverMessage: "DATABASE_URL cannot be parsed")
        }
        // Keywords before `dbname` are defaults; the expanded URI overrides them.
        let keywords = ["connect_timeout", "application_name"] + Self.silenceBounds.map(\.keyword) + ["dbname"]
        let values = ["5", applicationName] + Self.silenceBounds.map(\.value) + [url]
        let connection = withCStringArray(keywords) { keywordPointers in
            withCStringArray(values) { valuePointers in
                PQconnectdbParams(keywordPointers, valuePointers, 1)
            }
        }
        guard let connection else { throw PostgresError(.connectionFailed, serverMessage: "out of memory") }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Self.errorMessage(of: connection)
            PQfinish(connection)
            // libpq gives no SQLSTATE for a failed start-up, only the text. PgBouncer refuses any start-up parameter
            // it does not track (`options=-c …` in DATABASE_URL, unless `ignore_startup_parameters` names it): no
            // retry will ever get through, so it is not reported as an outage.
            if message.contains("unsupported startup parameter") {
                throw PostgresError(.startupParameterRefused, serverMessage: message)
            }
            if Self.isVerificationFailure(message) {
                throw PostgresError(.serverNotVerified, serverMessage: message)
            }
            throw PostgresError(.connectionFailed, serverMessage: message)
        }
        // libpq prints NOTICEs to stderr by default; stderr carries our JSON log lines, so drop them.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        handle = connection
    }

    deinit {
        if let handle { PQfinish(handle) }
    }

    /// How long this side waits on a server that has gone silent (a failover, a partition, a black-holed route):
    /// every deadline of ours depends on a blocking call that returns. TCP keepalives probe an idle connection after
    /// 10 s, every 5 s, and give up after 3 unanswered probes (a busy server's kernel still answers them); data left
    /// unacknowledged for 30 s ends the connection (`tcp_user_timeout`). So a statement waiting on a dead peer fails
    /// within about 30 s, instead of the operating system's two hours.
    public static let silenceBounds: [(keyword: String, value: String)] = [
        ("keepalives", "1"), ("keepalives_idle", "10"), ("keepalives_interval", "5"), ("keepalives_count", "3"),
        ("tcp_user_timeout", "30000"),
    ]

    /// What every transaction of this connection begins with (``withTransaction(_:)``): waits bounded by
    /// `lock_timeout` and `statement_timeout`, set with `SET LOCAL` so that they end with the transaction and never
    /// reach another client of a transaction-pooling proxy. `nil`: none (migrations, tests).
    public var transactionSettings: TransactionSettings?

    /// When set, ``query(_:)`` and ``executeScript(_:)`` wait for the server's answer only until then, polling the
    /// socket, and close the connection when it has not come (`.noAnswer`). The server-side bounds
    /// (`statement_timeout`) answer with an error, and the keepalives of ``silenceBounds`` notice a peer whose kernel
    /// stopped answering; neither helps when the answer is lost on the way and something between still acknowledges
    /// (a proxy or pooler whose upstream went silent). A caller with a deadline of its own (db-migrate, which must
    /// answer CloudFormation) sets it. `nil`: libpq's blocking wait.
    public var answerDeadline: ContinuousClock.Instant?

    /// Whether libpq can parse `url` as a URI or a key/value string (`PQconninfoParse`; nothing is sent).
    static func isParseable(_ url: String) -> Bool {
        guard !url.utf8.contains(0) else { return false }
        var message: UnsafeMutablePointer<CChar>?
        let options = url.withCString { PQconninfoParse($0, &message) }
        if let message { PQfreemem(message) }
        guard let options else { return false }
        PQconninfoFree(options)
        return true
    }

    /// Closes the connection; later calls throw `.connectionLost`.
    public func close() {
        if let handle { PQfinish(handle) }
        handle = nil
    }

    /// Whether the connection is still usable (checked before reusing it for another invocation).
    ///
    /// A server that was restarted, or that ended the session, has closed the socket, but libpq only notices when
    /// it next reads. Reading what is pending here (non-blocking: libpq's socket always is) lets a warm process see
    /// that and reconnect, instead of failing its first request after the database came back.
    public var isOpen: Bool {
        guard let handle else { return false }
        // Twice: the first read may only take the server's goodbye (57P01 "terminating connection"), the second
        // then sees the end of the stream. On a live connection both return at once with nothing read. If the
        // server's process has not closed the socket yet, the next query fails as `.connectionLost` (a 503).
        for _ in 0..<2 where PQstatus(handle) == CONNECTION_OK && PQtransactionStatus(handle) == PQTRANS_IDLE {
            guard PQconsumeInput(handle) == 1 else { break }
        }
        return PQstatus(handle) == CONNECTION_OK
    }

    /// Runs one parameterised statement and returns its rows (none for commands).
    /// - Throws: ``PostgresError``: `.server` with the SQLSTATE, or `.connectionLost`.
    @discardableResult
    public func query(_ query: PostgresQuery) throws(PostgresError) -> PostgresRows {
        guard let handle else { throw PostgresError(.connectionLost, serverMessage: "connection closed") }
        let binds = query.binds
        // libpq takes C strings: a NUL would end the value early and store something else than was asked.
        guard !query.sql.utf8.contains(0), !binds.contains(where: { $0?.utf8.contains(0) == true }) else {
            throw PostgresError(.invalidParameter, serverMessage: "a bind value holds a NUL character")
        }
        roundTrips += 1
        if let answerDeadline {
            let sent = withOptionalCStringArray(binds) { valuePointers in
                query.sql.withCString { sql in
                    PQsendQueryParams(handle, sql, Int32(binds.count), nil, valuePointers, nil, nil, 0)
                }
            }
            return try consume(try awaitResult(handle, sent: sent == 1, until: answerDeadline), connection: handle)
        }
        let result = withOptionalCStringArray(binds) { valuePointers in
            query.sql.withCString { sql in
                PQexecParams(handle, sql, Int32(binds.count), nil, valuePointers, nil, nil, 0)
            }
        }
        return try consume(result, connection: handle)
    }

    /// The answer to what was just sent, as `PQexec` would return it (the first failure, or the last result), read
    /// without blocking past `deadline`; the connection is closed when it has not come by then.
    private func awaitResult(
        _ handle: OpaquePointer, sent: Bool, until deadline: ContinuousClock.Instant
    ) throws(PostgresError) -> OpaquePointer? {
        guard sent else { return nil }
        var kept: OpaquePointer?
        while true {
            guard PQconsumeInput(handle) == 1 else {
                if let kept { PQclear(kept) }
                return nil
            }
            while PQisBusy(handle) == 0 {
                guard let next = PQgetResult(handle) else { return kept }
                if let previous = kept {
                    let failed = [PGRES_FATAL_ERROR, PGRES_BAD_RESPONSE].contains(PQresultStatus(previous))
                    if failed {
                        PQclear(next)
                        continue
                    }
                    PQclear(previous)
                }
                kept = next
            }
            let left = deadline - .now
            guard left > .zero else {
                if let kept { PQclear(kept) }
                close()
                throw PostgresError(.noAnswer, serverMessage: "no answer from the server before the deadline")
            }
            var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, Int32(clamping: max(1, left.milliseconds)))
        }
    }

    /// Runs trusted SQL that may hold several statements (a migration file). No parameters.
    public func executeScript(_ script: PostgresQuery) throws(PostgresError) {
        guard let handle else { throw PostgresError(.connectionLost, serverMessage: "connection closed") }
        precondition(script.binds.isEmpty, "a script takes no parameters")
        guard !script.sql.utf8.contains(0) else {
            throw PostgresError(.invalidParameter, serverMessage: "the script holds a NUL character")
        }
        roundTrips += 1
        if let answerDeadline {
            let sent = script.sql.withCString { PQsendQuery(handle, $0) }
            _ = try consume(try awaitResult(handle, sent: sent == 1, until: answerDeadline), connection: handle)
            return
        }
        let result = script.sql.withCString { PQexec(handle, $0) }
        _ = try consume(result, connection: handle)
    }

    /// Copies a result into Swift values, frees it, and turns a failure into a ``PostgresError``.
    func consume(_ result: OpaquePointer?, connection: OpaquePointer) throws(PostgresError) -> PostgresRows {
        guard let result else {
            throw PostgresError(.connectionLost, serverMessage: Self.errorMessage(of: connection))
        }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
            return PostgresRows(columns: [], rows: [], affectedRows: Self.affectedRows(result))
        case PGRES_TUPLES_OK:
            let columnCount = PQnfields(result)
            let rowCount = PQntuples(result)
            let columns = (0..<columnCount).map { String(cString: PQfname(result, $0)) }
            var rows: [[String?]] = []
            rows.reserveCapacity(Int(rowCount))
            for row in 0..<rowCount {
                rows.append(
                    (0..<columnCount).map { column in
                        PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column))
                    })
            }
            return PostgresRows(columns: columns, rows: rows, affectedRows: Self.affectedRows(result))
        case PGRES_FATAL_ERROR, PGRES_NONFATAL_ERROR, PGRES_BAD_RESPONSE:
            let sqlState = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            let message = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) }
            if PQstatus(connection) != CONNECTION_OK {
                throw PostgresError(
                    .connectionLost, sqlState: sqlState.map(SQLState.init(rawValue:)),
                    serverMessage: message ?? Self.errorMessage(of: connection))
            }
            throw PostgresError(
                .server, sqlState: sqlState.map(SQLState.init(rawValue:)),
                serverMessage: message ?? Self.errorMessage(of: connection))
        default:
            throw PostgresError(.unexpectedResult, serverMessage: String(cString: PQresStatus(PQresultStatus(result))))
        }
    }

    private static func affectedRows(_ result: OpaquePointer) -> Int {
        Int(String(cString: PQcmdTuples(result))) ?? 0
    }

    /// libpq's texts (PostgreSQL 15–17) for a server certificate that `sslmode=verify-ca`/`verify-full` refused, or
    /// for a root certificate file it could not use.
    static func isVerificationFailure(_ message: String) -> Bool {
        [
            "certificate verify failed", "does not match host name", "root certificate file",
            "could not get server's host name from server certificate",
        ].contains { message.contains($0) }
    }

    static func errorMessage(of connection: OpaquePointer) -> String {
        guard let message = PQerrorMessage(connection) else { return "unknown libpq error" }
        return String(cString: message).trimmingSuffix(while: \.isWhitespace)
    }
}

extension String {
    fileprivate func trimmingSuffix(while predicate: (Character) -> Bool) -> String {
        var copy = self
        while let last = copy.last, predicate(last) { copy.removeLast() }
        return copy
    }
}

/// Calls `body` with a C array of C strings that lives only for the call.
private func withCStringArray<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    withOptionalCStringArray(strings.map { Optional($0) }, body)
}

/// Calls `body` with a NULL-terminated C array of optional C strings (NULL entries are SQL NULLs).
func withOptionalCStringArray<R>(
    _ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R
) -> R {
    // Each string is copied into one buffer, then pointers into that buffer are handed to C.
    var offsets: [Int?] = []
    var storage: [CChar] = []
    for string in strings {
        guard let string else {
            offsets.append(nil)
            continue
        }
        offsets.append(storage.count)
        storage.append(contentsOf: string.utf8CString)
    }
    return storage.withUnsafeBufferPointer { buffer in
        var pointers: [UnsafePointer<CChar>?] = offsets.map { offset -> UnsafePointer<CChar>? in
            guard let offset, let base = buffer.baseAddress else { return nil }
            return base + offset
        }
        pointers.append(nil)
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}

import Libpq
import FunctionRuntime

/// The transaction of a recording endpoint (dose-record, slot-bulk-record, prn-record): the patient access checked
/// with the first reads, the endpoint's writes with the statement that queues the push they owe, `COMMIT`; it hands
/// back that push (``OwedPush``), which the endpoint dispatches once it has responded.
///
/// Each endpoint keeps its own SQL, checks and response; this owns what the three share, and adds no round trip:
/// the access statement travels ahead of the endpoint's statements in the first flight, and the outbox statement in
/// whichever flight the endpoint puts it. Waits are bounded by the session's `lock_timeout`, a serialization failure
/// or deadlock runs the whole body again (``PostgresConnection/withPipelinedTransaction(logger:_:)``), and the push
/// commits with the dose or not at all.
final class RecordingTransaction {
    /// What a recording body returns: its value, and the push it owes when it recorded a dose (what
    /// ``enqueuePush(_:in:ifRecorded:)`` gave back).
    struct Recording<Value> {
        var value: Value
        var push: OwedPush

        init(_ value: Value, owing push: OwedPush = .nothing) {
            self.value = value
            self.push = push
        }
    }

    private let transaction: PipelinedTransaction
    private let access: PatientAccess
    private let accessQuery: PostgresQuery?
    private let source: PushOutbox.Source
    private let context: InvocationContext
    private var accessAdded = false
    private var accessStatement: PipelinedTransaction.Statement?

    private init(
        _ transaction: PipelinedTransaction, access: PatientAccess, accessQuery: PostgresQuery?,
        source: PushOutbox.Source, context: InvocationContext
    ) {
        self.transaction = transaction
        self.access = access
        self.accessQuery = accessQuery
        self.source = source
        self.context = context
    }

    /// Runs `body` as one recording transaction for `access`.
    /// - Parameters:
    ///   - lock: when given, the first flight takes this transaction-scoped advisory lock (`namespace`,
    ///     `hashtext(key)`) instead of a bare link check, in the one statement
    ///     ``PatientAccess/lockQuery(namespace:key:)`` that takes it only with the access.
    /// - Returns: once committed, the body's value and the push it owes (``OwedPush/nothing`` when it owes none): the
    ///   endpoint responds, then dispatches it.
    static func run<Value>(
        _ access: PatientAccess, source: PushOutbox.Source, context: InvocationContext,
        lock: (namespace: Int, key: String)? = nil, _ body: (RecordingTransaction) throws -> Recording<Value>
    ) throws -> (value: Value, push: OwedPush) {
        let accessQuery = lock.map { access.lockQuery(namespace: $0.namespace, key: $0.key) } ?? access.linkQuery
        let connection = try context.database.connection()
        let recorded = try connection.withPipelinedTransaction(logger: context.logger) { transaction in
            try body(
                RecordingTransaction(
                    transaction, access: access, accessQuery: accessQuery, source: source, context: context))
        }
        return (recorded.value, recorded.push)
    }

    /// An empty flight; the transaction's first already holds the access statement, ahead of the endpoint's.
    func flight() -> PipelinedTransaction.Flight {
        var flight = transaction.flight()
        if !accessAdded {
            accessAdded = true
            accessStatement = flight.add(accessQuery)
        }
        return flight
    }

    /// Runs `flight` in one round trip. When it carries the access statement, access is confirmed first: a
    /// caregiver without an active link is refused (404) before anything else the flight read is handed back.
    @discardableResult
    func run(_ flight: PipelinedTransaction.Flight) throws -> PipelinedTransaction.FlightResults {
        let results = try transaction.run(flight)
        if let accessStatement, results.includes(accessStatement) { try access.checkLink(results[accessStatement]) }
        return results
    }

    /// Adds to `flight` the statement that queues `event`'s push (with `ifRecorded` as in
    /// ``PushOutbox/enqueueQuery(_:source:configuration:ifRecorded:logger:)``), unless this deployment sends no push
    /// (`PUSH_ENVIRONMENT` unset, which is logged).
    /// - Returns: that push, to hand back in the body's ``Recording`` when the dose was recorded (``OwedPush/nothing``
    ///   when no push is sent).
    func enqueuePush(
        _ event: DoseTakenEvent, in flight: inout PipelinedTransaction.Flight, ifRecorded: PushOutbox.RecordedRow?
    ) -> OwedPush {
        guard
            let query = PushOutbox.enqueueQuery(
                event, source: source, configuration: context.configuration, ifRecorded: ifRecorded,
                logger: context.logger)
        else { return .nothing }
        _ = flight.add(query)
        return OwedPush(eventKey: event.eventKey, context: context)
    }
}

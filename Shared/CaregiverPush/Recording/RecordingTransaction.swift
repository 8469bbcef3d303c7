import Codecs
import Libpq
import FunctionRuntime
import FoundationEssentials
import Logging

/// The transaction of a recording endpoint (dose-record, slot-bulk-record, prn-record): a patient's session read
/// in its first flight, the patient access checked with the first reads, the endpoint's writes with the statement
/// that queues the push they owe, `COMMIT`; it hands back what was recorded and the push it owes (``Recorded``),
/// which the endpoint responds with.
///
/// Each endpoint keeps its own SQL, checks and response; this owns what the three share, and adds no round trip:
/// the session read is the first flight (the one a read of its own would have cost), the access statement travels
/// ahead of the endpoint's statements in the next flight, and the outbox statement in whichever flight the endpoint
/// puts it. Waits are bounded by the session's `lock_timeout`, a serialization failure or deadlock runs the whole
/// body again (``PostgresConnection/withPipelinedTransaction(logger:_:)``), and the push commits with the dose or
/// not at all.
final class RecordingTransaction {
    private let transaction: PipelinedTransaction
    private let credential: Credential
    private let accessCheckedByCall: Bool
    private let source: PushOutbox.Source
    private let configuration: Configuration
    private let logger: Logger
    private var access: PatientAccess?
    private var accessQuery: PostgresQuery?
    private var accessAdded = false
    private var accessStatement: PipelinedTransaction.Statement?
    /// The outbox statement and the lease its deliveries are written under; then what it leased, once it ran.
    private var outbox: (statement: PipelinedTransaction.Statement, token: UUID)?
    /// The lease a call that queues the push itself writes its deliveries under (``pushArguments(for:)``).
    private var callLease: UUID?
    private var leased: PostgresRows?

    private init(
        _ transaction: PipelinedTransaction, credential: Credential, accessCheckedByCall: Bool,
        source: PushOutbox.Source, configuration: Configuration, logger: Logger
    ) {
        self.transaction = transaction
        self.credential = credential
        self.accessCheckedByCall = accessCheckedByCall
        self.source = source
        self.configuration = configuration
        self.logger = logger
    }

    /// Runs `body` as one recording transaction for the caller `credential` names, on `database`. The body asks
    /// for the ``principal()`` first, then checks the request and names the access it records under
    /// (``grant(_:lock:)``) before its first ``flight()``.
    /// - Parameters:
    ///   - accessCheckedByCall: the body's one call checks a caregiver's link itself, before it writes anything, and
    ///     the body refuses with ``PatientAccess/notFound`` on its answer: no statement of the transaction's own.
    ///   - configuration: whether pushes are on, and the outbox's device bounds.
    /// - Returns: once committed, what the body recorded, with the push it owes when it recorded a dose: the
    ///   endpoint responds with it (``Recorded``).
    static func run<Value>(
        _ credential: Credential, source: PushOutbox.Source, database: DatabaseSession, configuration: Configuration,
        logger: Logger, accessCheckedByCall: Bool = false,
        _ body: (RecordingTransaction) throws -> Recorded<Value>
    ) throws -> Recorded<Value> {
        try database.connection().withPipelinedTransaction(logger: logger) { transaction in
            let recording = RecordingTransaction(
                transaction, credential: credential, accessCheckedByCall: accessCheckedByCall, source: source,
                configuration: configuration, logger: logger)
            let recorded = try body(recording)
            guard let token = recording.outbox?.token ?? recording.callLease, let leased = recording.leased,
                !leased.isEmpty
            else { return recorded }
            return recorded.leasing(OwedPush.Lease(token: token, rows: leased))
        }
    }

    /// Who is calling: a caregiver's verified token as it is; a patient's session read now, as the transaction's
    /// first flight (`BEGIN` with the settings and the read: the one round trip a read-only transaction of its own
    /// cost, without that transaction's statements), so that a token whose session is unknown, revoked or expired is
    /// refused before the request's body is looked at (docs/behaviour.md#contract-checks).
    /// - Throws: ``Problem`` 401 when the patient's session is not found.
    func principal() throws -> Principal {
        switch credential {
        case .verified(let principal):
            return principal
        case .patientSession(let session):
            var read = transaction.flight()
            let found = read.add(session.query)
            return try session.principal(transaction.run(read)[found], logger: logger)
        }
    }

    /// The access the body records under, before its first ``flight()``.
    /// - Parameter lock: when given, the first flight takes this transaction-scoped advisory lock (`namespace`,
    ///   `hashtext(key)`) instead of a bare link check, in the one statement
    ///   ``PatientAccess/lockQuery(namespace:key:)`` that takes it only with the access.
    func grant(_ access: PatientAccess, lock: (namespace: Int, key: String)? = nil) {
        self.access = access
        accessQuery =
            accessCheckedByCall
            ? nil : lock.map { access.lockQuery(namespace: $0.namespace, key: $0.key) } ?? access.linkQuery
    }

    /// An empty flight; the transaction's first already holds the access statement, ahead of the endpoint's.
    func flight() -> PipelinedTransaction.Flight {
        precondition(access != nil, "a recording grants its access before its first flight")
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
        if let access, let accessStatement, results.includes(accessStatement) {
            try access.checkLink(results[accessStatement])
        }
        if let outbox, results.includes(outbox.statement) {
            let rows: PostgresRows = results[outbox.statement]
            leased = rows
        }
        return results
    }

    /// Adds to `flight` the statement that queues `event`'s push (with `ifRecorded` as in
    /// ``PushOutbox/enqueueQuery(_:source:configuration:ifRecorded:lease:logger:)``), unless this deployment sends no
    /// push (`PUSH_ENVIRONMENT` unset, which is logged). The deliveries are leased to this recording's own sender,
    /// unless the sweep sends first (`PUSH_FIRST_SEND=sweep`): then they are queued due now, and nothing is owed
    /// by this process.
    /// - Returns: that push, for the body's ``Recorded/recorded(_:owing:)`` when the dose was recorded.
    func enqueuePush(
        _ event: DoseTakenEvent, in flight: inout PipelinedTransaction.Flight, ifRecorded: PushOutbox.RecordedRow?
    ) -> OwedPush {
        let sendsHere = configuration.pushFirstSend == .recording
        let token = sendsHere ? UUID.random() : nil
        guard
            let query = PushOutbox.enqueueQuery(
                event, source: source, configuration: configuration, ifRecorded: ifRecorded, lease: token,
                logger: logger)
        else { return OwedPush(eventKey: nil) }
        let statement = flight.add(query)
        guard let token else { return OwedPush(eventKey: nil) }
        outbox = (statement, token)
        return OwedPush(eventKey: event.eventKey)
    }
}

extension RecordingTransaction {
    /// What a call that queues `event`'s push itself takes (as the statement ``enqueuePush(_:in:ifRecorded:)`` adds
    /// does): the devices' environment (`nil` when this deployment sends no push, which is logged), their bounds, and
    /// the lease the deliveries are written under for this recording's own sender — none when the sweep sends first
    /// (`PUSH_FIRST_SEND=sweep`). The call's leased rows go to ``leasedByCall(_:)``.
    func pushArguments(for event: DoseTakenEvent) -> (arguments: PushOutbox.CallArguments, owed: OwedPush) {
        let environment = PushOutbox.environment(configuration, logger: logger)
        let token = environment != nil && configuration.pushFirstSend == .recording ? UUID.random() : nil
        callLease = token
        let arguments = PushOutbox.CallArguments(
            environment: environment, registrationDays: configuration.pushDeviceStaleDays,
            deviceCap: max(configuration.pushMaxDevicesPerCaregiver, 1), leaseToken: token,
            leaseSeconds: token == nil ? 0 : configuration.pushLeaseSeconds)
        return (arguments, OwedPush(eventKey: token == nil ? nil : event.eventKey))
    }

    /// The deliveries the call of ``pushArguments(for:)`` wrote leased to this recording's sender, as a lease
    /// statement returns them: handed to the sender once the transaction has committed.
    func leasedByCall(_ rows: PostgresRows) {
        leased = rows
    }
}

/// What a recording transaction returns: its value, and in its type whether a push is owed — recorded (a push owed
/// once the transaction has committed) or unchanged (the dose was recorded before: nothing owed).
///
/// The value is not handed out on its own: the endpoint's writer takes the whole of it, responds with the value and
/// then sends the push it owes (``EndpointWriter/respond(_:_:)``). An endpoint cannot answer with what it recorded
/// and leave the push behind.
struct Recorded<Value> {
    fileprivate enum Outcome {
        case recorded(Value, OwedPush)
        case unchanged(Value)
    }

    fileprivate let outcome: Outcome

    /// Recorded now: `push` is owed once the transaction has committed.
    static func recorded(_ value: Value, owing push: OwedPush) -> Recorded { Recorded(outcome: .recorded(value, push)) }

    /// Recorded before (or nothing to record): nothing is owed.
    static func unchanged(_ value: Value) -> Recorded { Recorded(outcome: .unchanged(value)) }

    /// The same, its push owed with the deliveries the outbox statement leased for it.
    fileprivate func leasing(_ lease: OwedPush.Lease) -> Recorded {
        guard case .recorded(let value, let push) = outcome else { return self }
        return .recorded(value, owing: OwedPush(eventKey: push.eventKey, lease: lease))
    }

    /// The response made from the value and whether it was recorded now, and the push owed (`nil` when none): for
    /// the writer alone, which sends the one after the other.
    func take<Response>(_ makeResponse: (Value, _ recordedNow: Bool) throws -> Response) rethrows -> (
        Response, OwedPush?
    ) {
        switch outcome {
        case .recorded(let value, let push): (try makeResponse(value, true), push)
        case .unchanged(let value): (try makeResponse(value, false), nil)
        }
    }
}

/// The push a committed recording owes (docs/behaviour.md#sending): the key of the event whose deliveries the
/// transaction queued (`nil` when this process sends none: `PUSH_ENVIRONMENT` unset, or the sweep sends first,
/// `PUSH_FIRST_SEND=sweep`), and the deliveries it queued already leased to the recording's sender, when it did.
struct OwedPush {
    /// Deliveries written `SENDING` under `token` by the recording transaction itself: the outbox statement's rows,
    /// which the sender reads as a lease statement's.
    struct Lease {
        let token: UUID
        let rows: PostgresRows
    }

    let eventKey: String?
    var lease: Lease? = nil
}

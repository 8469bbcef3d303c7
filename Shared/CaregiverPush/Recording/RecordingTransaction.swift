import Codecs
import Libpq
import FunctionRuntime
import FoundationEssentials
import Logging

/// The transaction of a recording endpoint (dose-record, slot-bulk-record, prn-record): the patient access checked
/// with the first reads, the endpoint's writes with the statement that queues the push they owe, `COMMIT`; it hands
/// back what was recorded and the push it owes (``Recorded``), which the endpoint responds with.
///
/// Each endpoint keeps its own SQL, checks and response; this owns what the three share, and adds no round trip:
/// the access statement travels ahead of the endpoint's statements in the first flight, and the outbox statement in
/// whichever flight the endpoint puts it. Waits are bounded by the session's `lock_timeout`, a serialization failure
/// or deadlock runs the whole body again (``PostgresConnection/withPipelinedTransaction(logger:_:)``), and the push
/// commits with the dose or not at all.
final class RecordingTransaction {
    private let transaction: PipelinedTransaction
    private let access: PatientAccess
    private let accessQuery: PostgresQuery?
    private let source: PushOutbox.Source
    private let configuration: Configuration
    private let logger: Logger
    private var accessAdded = false
    private var accessStatement: PipelinedTransaction.Statement?

    private init(
        _ transaction: PipelinedTransaction, access: PatientAccess, accessQuery: PostgresQuery?,
        source: PushOutbox.Source, configuration: Configuration, logger: Logger
    ) {
        self.transaction = transaction
        self.access = access
        self.accessQuery = accessQuery
        self.source = source
        self.configuration = configuration
        self.logger = logger
    }

    /// Runs `body` as one recording transaction for `access` on `database`.
    /// - Parameters:
    ///   - lock: when given, the first flight takes this transaction-scoped advisory lock (`namespace`,
    ///     `hashtext(key)`) instead of a bare link check, in the one statement
    ///     ``PatientAccess/lockQuery(namespace:key:)`` that takes it only with the access.
    ///   - configuration: whether pushes are on, and the outbox's device bounds.
    /// - Returns: once committed, what the body recorded, with the push it owes when it recorded a dose: the
    ///   endpoint responds with it (``Recorded``).
    static func run<Value>(
        _ access: PatientAccess, source: PushOutbox.Source, database: DatabaseSession, configuration: Configuration,
        logger: Logger, lock: (namespace: Int, key: String)? = nil,
        _ body: (RecordingTransaction) throws -> Recorded<Value>
    ) throws -> Recorded<Value> {
        let accessQuery = lock.map { access.lockQuery(namespace: $0.namespace, key: $0.key) } ?? access.linkQuery
        return try database.connection().withPipelinedTransaction(logger: logger) { transaction in
            try body(
                RecordingTransaction(
                    transaction, access: access, accessQuery: accessQuery, source: source,
                    configuration: configuration, logger: logger))
        }
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
    /// - Returns: that push, for the body's ``Recorded/recorded(_:owing:)`` when the dose was recorded.
    func enqueuePush(
        _ event: DoseTakenEvent, in flight: inout PipelinedTransaction.Flight, ifRecorded: PushOutbox.RecordedRow?
    ) -> OwedPush {
        guard
            let query = PushOutbox.enqueueQuery(
                event, source: source, configuration: configuration, ifRecorded: ifRecorded, logger: logger)
        else { return OwedPush(eventKey: nil) }
        _ = flight.add(query)
        return OwedPush(eventKey: event.eventKey)
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
/// transaction queued; `nil` when this deployment sends no push (`PUSH_ENVIRONMENT` unset).
struct OwedPush {
    let eventKey: String?
}

/// Whose dose a request records, and who records it (docs/behaviour.md#access).
///
/// A patient records for itself: `patientId` absent or its own. A caregiver names the patient and must be actively
/// linked to it. Anything else is 404, indistinguishable from a patient that does not exist.
public struct PatientAccess: Sendable, Equatable {
    public enum Role: String, Sendable {
        case patient = "PATIENT"
        case caregiver = "CAREGIVER"
    }

    public let patientID: AppID
    /// `recorded_by_role` / `recorded_by_id`: the patient's id, or the caregiver's (a Supabase user id) as text.
    public let role: Role
    public let recorderID: AppID
    /// The caregiver who recorded, who is not pushed about their own action.
    public let actingCaregiverID: UUID?

    /// The access a validated `patientId` field asks for, before a caregiver's link is known: a patient's own, or
    /// the named patient's for a caregiver (confirmed by ``linkQuery`` and ``checkLink(_:)`` in the transaction).
    /// - Throws: ``Problem`` 404 when a patient names another patient.
    static func requested(_ principal: Principal, requestedPatientID: AppID?) throws(Problem) -> PatientAccess {
        switch principal {
        case .patient(let id, _):
            guard requestedPatientID == nil || requestedPatientID == id else { throw notFound }
            return PatientAccess(patientID: id, role: .patient, recorderID: id, actingCaregiverID: nil)
        case .caregiver(let caregiverID):
            // A missing patientId is rejected by validation before this point.
            guard let patientID = requestedPatientID else { throw notFound }
            return PatientAccess(
                patientID: patientID, role: .caregiver, recorderID: AppID(caregiverID), actingCaregiverID: caregiverID)
        }
    }

    /// For a caregiver, the statement that returns a row when its link to the patient is active; `nil` for a
    /// patient, whose own access needs no check. Sent with the transaction's first reads; its rows go to
    /// ``checkLink(_:)`` before anything else read with it is used.
    var linkQuery: PostgresQuery? {
        guard role == .caregiver else { return nil }
        return """
            SELECT 1 FROM caregiver_push.caregiver_patient_links
            WHERE caregiver_id = \(actingCaregiverID) AND patient_id = \(patientID) AND revoked_at IS NULL
            """
    }

    /// A statement that takes the transaction-scoped advisory lock (`namespace`, `hashtext(key)`) only when the
    /// access holds, and returns a row when it took it: for a caregiver the link check and the lock are one
    /// statement, so a caregiver without an active link never holds the lock. Its rows go to ``checkLink(_:)``.
    func lockQuery(namespace: Int, key: String) -> PostgresQuery {
        guard role == .caregiver else { return "SELECT pg_advisory_xact_lock(\(namespace), hashtext(\(key)))" }
        return """
            SELECT pg_advisory_xact_lock(\(namespace), hashtext(\(key))) FROM caregiver_push.caregiver_patient_links
            WHERE caregiver_id = \(actingCaregiverID) AND patient_id = \(patientID) AND revoked_at IS NULL
            """
    }

    /// Confirms a caregiver's access from what ``linkQuery`` (or ``lockQuery(namespace:key:)``) returned.
    /// - Throws: ``Problem`` 404 (not linked), indistinguishable from a patient that does not exist.
    func checkLink(_ rows: PostgresRows) throws(Problem) {
        guard role == .patient || !rows.isEmpty else { throw Self.notFound }
    }

    static let notFound = Problem.notFound("No such patient.")
}

import Codecs
import Libpq
import PushPayloadContract
import FoundationEssentials
import Logging

/// A TAKEN dose to tell caregivers about: everything the push needs, and nothing else — no medication, no dose.
public struct DoseTakenEvent: Sendable, Equatable {
    public let patientID: AppID
    /// The dose's Tokyo date, `YYYY-MM-DD`.
    public let date: String
    public let slot: Slot
    /// Set for slot-bulk recordings: one event for the whole group.
    public let recordingGroupID: AppID?
    public let takenAt: Date
    /// Whether every dose of the event was taken within its window (docs/behaviour.md#on-time): a slot recording's
    /// doses all, two single doses merged into one event both.
    public let withinTime: Bool
    /// The caregiver who recorded it, who is not told about their own action; `nil` when the patient recorded.
    public let actingCaregiverID: UUID?
    /// Who recorded the event's doses (`data.recordedBy`).
    public let recorder: DoseRecorder

    public init(
        patientID: AppID, date: String, slot: Slot, recordingGroupID: AppID?, takenAt: Date, withinTime: Bool,
        actingCaregiverID: UUID?
    ) {
        self.init(
            storedKey: Self.eventKey(
                patientID: patientID, date: date, slot: slot, group: recordingGroupID, takenAt: takenAt),
            patientID: patientID, date: date, slot: slot, recordingGroupID: recordingGroupID, takenAt: takenAt,
            withinTime: withinTime, actingCaregiverID: actingCaregiverID)
    }

    /// An event as the outbox stored it: its key is the stored one, whatever the fields would compute today.
    init(
        storedKey: String, patientID: AppID, date: String, slot: Slot, recordingGroupID: AppID?, takenAt: Date,
        withinTime: Bool, actingCaregiverID: UUID? = nil, recorder: DoseRecorder? = nil
    ) {
        self.recorder = recorder ?? (actingCaregiverID == nil ? .patient : .caregiver)
        self.patientID = patientID
        self.date = date
        self.slot = slot
        self.recordingGroupID = recordingGroupID
        self.takenAt = takenAt
        self.withinTime = withinTime
        self.actingCaregiverID = actingCaregiverID
        self.eventKey = storedKey
    }

    /// An as-needed (PRN) dose: an event of its own, keyed by its record (`doseTaken:prn:{recordID}`), never merged
    /// with a slot's. Its date and slot are those of `takenAt` in Tokyo; it is never within time.
    public static func prn(recordID: AppID, patientID: AppID, takenAt: Date, actingCaregiverID: UUID?) -> Self {
        Self(
            storedKey: "doseTaken:prn:\(recordID)", patientID: patientID,
            date: TokyoClock.dateString(of: takenAt), slot: Slot(instant: takenAt), recordingGroupID: nil,
            takenAt: takenAt, withinTime: false, actingCaregiverID: actingCaregiverID)
    }

    /// The de-duplication key (docs/behaviour.md#event-key): `doseTaken:{group}` for a slot recording,
    /// `doseTaken:prn:{record}` for a PRN dose (``prn(recordID:patientID:takenAt:actingCaregiverID:)``), or for a
    /// single scheduled dose `doseTaken:{patient}:{date}:{slot}:{HH:mm}` — the dose's Tokyo date and slot and the
    /// Tokyo minute of `takenAt`, which two single doses of one slot taken in one minute share. The primary key of
    /// `push_events`.
    public let eventKey: String

    private static func eventKey(patientID: AppID, date: String, slot: Slot, group: AppID?, takenAt: Date) -> String {
        if let group { return "doseTaken:\(group)" }
        return
            "doseTaken:\(patientID):\(date):\(slot.rawValue):\(TokyoClock.hourMinute(takenAt))"
    }
}

/// The push side of a recording transaction (docs/behaviour.md#outbox): the event and one `PENDING` delivery per
/// recipient device, written by the transaction that records the dose.
///
/// If the transaction commits, the push is owed and nothing can lose it — the post-response sender or, failing
/// that, `push-sweep` sends it. If it rolls back, nothing is owed. A conflict on (event, device) does nothing, so a
/// retried or concurrent duplicate recording still owes one delivery per device per event. A conflict on the event
/// key (two single doses of one slot taken in one minute, docs/behaviour.md#event-key) keeps the stored event and
/// merges the new recording into it (docs/behaviour.md#on-time): `within_time` AND-ed, `recorded_by` `BOTH` when the
/// two recorders differ. When that changes the message's text (within time → not, or "a caregiver recorded" → the
/// plain text), the event's `revision` goes up and every delivery
/// already sent, or being sent, with an older revision is owed again: the phone is told the truth under the same
/// collapse id, and shows one notification.
public enum PushOutbox {
    /// The function whose transaction wrote the event (stored for operators, never sent).
    public enum Source: String, Sendable {
        case doseRecord = "dose-record"
        case slotBulkRecord = "slot-bulk-record"
        case prnRecord = "prn-record"
    }

    /// A row a recording transaction tried to insert with an id of its own making, in the same flight as the
    /// outbox statement: the event is owed only if that row exists when the statement runs, that is, only if the
    /// insert did not find the dose already recorded.
    package enum RecordedRow {
        case dose(AppID)
        case prnDose(AppID)
    }

    /// The statement that writes `event` and its deliveries when pushes are on, `nil` when `PUSH_ENVIRONMENT` is not
    /// set: for a recording transaction that sends it in one flight with its insert.
    /// - Parameters:
    ///   - recorded: the row whose existence decides whether the event is owed (`nil`: it is).
    ///   - lease: the token the new deliveries are leased under, for the recording's own send; `nil`: they are
    ///     queued `PENDING`, due now, for the sweep (`PUSH_FIRST_SEND=sweep`).
    ///   - logger: says so when no push is owed because pushes are off: that dose will never be pushed.
    static func enqueueQuery(
        _ event: DoseTakenEvent, source: Source, configuration: Configuration, ifRecorded recorded: RecordedRow?,
        lease: UUID?, logger: Logger
    ) -> PostgresQuery? {
        environment(configuration, logger: logger).map {
            enqueueQuery(
                event, source: source, environment: $0, deviceCap: configuration.pushMaxDevicesPerCaregiver,
                registrationDays: configuration.pushDeviceStaleDays, ifRecorded: recorded,
                lease: lease.map { ($0, configuration.pushLeaseSeconds) })
        }
    }

    /// The devices' environment pushes go to, `nil` when `PUSH_ENVIRONMENT` is not set — which `logger` is told: a
    /// dose recorded now will never be pushed.
    static func environment(_ configuration: Configuration, logger: Logger) -> Configuration.PushEnvironment? {
        if configuration.pushEnvironment == nil {
            logger.warning(
                "push not owed: PUSH_ENVIRONMENT is not DEV or PROD", metadata: ["config.variable": "PUSH_ENVIRONMENT"])
        }
        return configuration.pushEnvironment
    }

    /// The statement that writes `event` and its deliveries, when `recorded` (if any) exists; run inside the
    /// recording transaction.
    ///
    /// Recipients (docs/behaviour.md#outbox), decided now: caregivers actively linked to the patient, minus the
    /// caregiver who recorded; their enabled devices in `environment` registered (or renewed) within the last
    /// `registrationDays` (`PUSH_DEVICE_STALE_DAYS`, docs/behaviour.md#registration-bound), at most `deviceCap` per caregiver (the most
    /// recently seen), so that one event never owes more than `deviceCap` × linked caregivers deliveries even if the
    /// cap was exceeded before it was enforced. One call of `caregiver_push.enqueue_dose_taken` (migration 000018),
    /// whose statement is served by `caregiver_patient_links_active_by_patient` and `push_devices_enabled_by_owner`.
    ///
    /// With `lease`, the new deliveries are written already leased to the recording's own sender (`SENDING`, one
    /// attempt, `lease_until` `lease.seconds` ahead, the event's revision) and the statement returns them as the
    /// lease statement does, column for column: the sender sends them without a lease statement of its own, and
    /// each row is
    /// written once before its outcome. A sender that dies leaves the lease to run out, and the sweep sends them.
    /// An event revised by an earlier recording gets `PENDING` rows and returns none: its sender leases the event's
    /// deliveries, the reopened ones with them. Without `lease`, every row is `PENDING`, and the statement returns
    /// each row it queued.
    ///
    /// Package-visible so that the tests and benchmarks queue an event with the very statement a recording runs.
    package static func enqueueQuery(
        _ event: DoseTakenEvent, source: Source, environment: Configuration.PushEnvironment, deviceCap: Int,
        registrationDays: Int = Configuration.defaultDeviceStaleDays, ifRecorded recorded: RecordedRow?,
        lease: (token: UUID, seconds: Double)? = nil
    ) -> PostgresQuery {
        let (kind, recordID): (String?, AppID?) =
            switch recorded {
            case .dose(let id): ("dose", id)
            case .prnDose(let id): ("prn", id)
            case nil: (nil, nil)
            }
        // One PL/pgSQL call (migration 000018): the statement's plan is kept for the server connection's life.
        return """
            SELECT * FROM caregiver_push.enqueue_dose_taken(
                \(kind)::text, \(recordID)::text, \(event.eventKey)::text, \(source.rawValue)::text,
                \(event.patientID)::text, \(event.date)::date, \(event.slot.rawValue)::text,
                \(event.recordingGroupID)::text, \(event.withinTime)::boolean, \(event.takenAt)::timestamptz,
                \(StoredRecorder(event.recorder).rawValue)::text, \(event.actingCaregiverID)::uuid,
                \(environment.rawValue)::text, \(registrationDays)::integer, \(max(deviceCap, 1))::integer,
                \(lease?.token)::uuid, \(lease?.seconds ?? 0)::double precision)
            """
    }

    /// The outbox's arguments for a recording call that queues the push itself (as
    /// ``enqueueQuery(_:source:environment:deviceCap:registrationDays:ifRecorded:lease:)`` passes them to
    /// `enqueue_dose_taken`): the devices' environment (`nil`: pushes are off, nothing is queued), their bounds, and
    /// the lease the deliveries are written under (`nil`: queued `PENDING` for the sweep).
    struct CallArguments {
        let environment: Configuration.PushEnvironment?
        let registrationDays: Int
        let deviceCap: Int
        let leaseToken: UUID?
        let leaseSeconds: Double
    }

    /// `push_events.recorded_by`'s value for a recorder.
    enum StoredRecorder: String {
        case patient = "PATIENT"
        case caregiver = "CAREGIVER"
        case both = "BOTH"

        init(_ recorder: DoseRecorder) {
            switch recorder {
            case .patient: self = .patient
            case .caregiver: self = .caregiver
            case .both: self = .both
            }
        }

        var recorder: DoseRecorder {
            switch self {
            case .patient: .patient
            case .caregiver: .caregiver
            case .both: .both
            }
        }
    }
}

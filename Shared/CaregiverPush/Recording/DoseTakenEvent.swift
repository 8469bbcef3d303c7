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
    ///   - lease: the token the new deliveries are leased under, for the recording's own send.
    ///   - logger: says so when no push is owed because pushes are off: that dose will never be pushed.
    static func enqueueQuery(
        _ event: DoseTakenEvent, source: Source, configuration: Configuration, ifRecorded recorded: RecordedRow?,
        lease: UUID, logger: Logger
    ) -> PostgresQuery? {
        if configuration.pushEnvironment == nil {
            logger.warning(
                "push not owed: PUSH_ENVIRONMENT is not DEV or PROD", metadata: ["config.variable": "PUSH_ENVIRONMENT"])
        }
        return configuration.pushEnvironment.map {
            enqueueQuery(
                event, source: source, environment: $0, deviceCap: configuration.pushMaxDevicesPerCaregiver,
                registrationDays: configuration.pushDeviceStaleDays, ifRecorded: recorded,
                lease: (lease, configuration.pushLeaseSeconds))
        }
    }

    /// The statement that writes `event` and its deliveries, when `recorded` (if any) exists; run inside the
    /// recording transaction.
    ///
    /// Recipients (docs/behaviour.md#outbox), decided now: caregivers actively linked to the patient, minus the
    /// caregiver who recorded; their enabled devices in `environment` registered (or renewed) within the last
    /// `registrationDays` (`PUSH_DEVICE_STALE_DAYS`, docs/behaviour.md#registration-bound), at most `deviceCap` per caregiver (the most
    /// recently seen), so that one event never owes more than `deviceCap` × linked caregivers deliveries even if the
    /// cap was exceeded before it was enforced. One statement, served by `caregiver_patient_links_active_by_patient`
    /// and `push_devices_enabled_by_owner`.
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
        // Only the table the recording wrote to is asked: a statement naming no table it does not need plans faster.
        let (head, recordID, tail): (StaticString, AppID?, StaticString) =
            switch recorded {
            case .dose(let id): ("SELECT EXISTS (SELECT 1 FROM caregiver_push.dose_records WHERE id = ", id, ")")
            case .prnDose(let id): ("SELECT EXISTS (SELECT 1 FROM caregiver_push.prn_dose_records WHERE id = ", id, ")")
            case nil: ("SELECT ", nil, "::text IS NULL")
            }
        return """
            WITH owed AS (
                \(sql: head)\(recordID)\(sql: tail) AS owed
            ), event AS (
                INSERT INTO caregiver_push.push_events AS e
                    (event_key, kind, source, patient_id, local_date, slot, recording_group_id, within_time, taken_at,
                     recorded_by)
                SELECT \(event.eventKey), 'DOSE_TAKEN', \(source.rawValue), \(event.patientID), \(event.date)::date,
                       \(event.slot.rawValue), \(event.recordingGroupID)::text, \(event.withinTime), \(event.takenAt),
                       \(StoredRecorder(event.recorder).rawValue)
                FROM owed WHERE owed.owed
                ON CONFLICT (event_key) DO UPDATE
                    SET within_time = e.within_time AND excluded.within_time,
                        recorded_by = CASE WHEN e.recorded_by = excluded.recorded_by THEN e.recorded_by ELSE 'BOTH' END,
                        revision = e.revision + CASE
                            WHEN (e.within_time AND NOT excluded.within_time)
                              OR (e.recorded_by = 'CAREGIVER' AND excluded.recorded_by <> 'CAREGIVER') THEN 1 ELSE 0 END
                RETURNING e.event_key, e.patient_id, e.local_date, e.slot, e.recording_group_id, e.taken_at,
                          e.within_time, e.recorded_by, e.revision
            ), reopened AS (
                -- Only once revised: what was sent (or is being sent) from an older revision is owed again. The
                -- event's PENDING rows are rewritten unchanged, which holds their locks until COMMIT: a lease that
                -- would word them from the older revision skips them meanwhile.
                UPDATE caregiver_push.push_deliveries p
                SET status = 'PENDING',
                    attempts = CASE WHEN p.status = 'PENDING' THEN p.attempts ELSE 0 END,
                    next_attempt_at = CASE WHEN p.status = 'PENDING' THEN p.next_attempt_at ELSE now() END,
                    lease_until = NULL, lease_token = NULL, updated_at = now()
                FROM event
                WHERE event.revision > 1 AND p.event_key = \(event.eventKey)
                  AND p.status IN ('PENDING', 'SENDING', 'SENT') AND p.sent_revision IS DISTINCT FROM event.revision
            ), holder AS (
                -- The lease the new rows are written under: none for an event revised before (its older rows are
                -- owed again, and the sender leases them all by the event), nor when the caller leases later.
                SELECT CASE WHEN event.revision = 1 THEN \(lease?.token)::uuid END AS token FROM event
            ), recipients AS (
                SELECT d.id, d.token, d.target, d.language
                FROM holder, caregiver_push.caregiver_patient_links l
                CROSS JOIN LATERAL (
                    SELECT id, token, target, language FROM caregiver_push.push_devices
                    WHERE owner_type = 'CAREGIVER' AND owner_id = l.caregiver_id
                      AND environment = \(environment.rawValue) AND is_enabled
                      AND last_seen_at > now() - make_interval(days => \(registrationDays))
                    ORDER BY last_seen_at DESC, id
                    LIMIT \(max(deviceCap, 1))
                ) d
                WHERE l.patient_id = \(event.patientID) AND l.revoked_at IS NULL
                  AND l.caregiver_id IS DISTINCT FROM \(event.actingCaregiverID)::uuid
            ), queued AS (
                INSERT INTO caregiver_push.push_deliveries AS p
                    (event_key, push_device_id, status, next_attempt_at, attempts, lease_token, lease_until,
                     sent_revision)
                SELECT \(event.eventKey), r.id, CASE WHEN holder.token IS NULL THEN 'PENDING' ELSE 'SENDING' END,
                       now(), CASE WHEN holder.token IS NULL THEN 0 ELSE 1 END, holder.token,
                       CASE WHEN holder.token IS NOT NULL
                            THEN now() + make_interval(secs => \(lease?.seconds ?? 0)) END,
                       CASE WHEN holder.token IS NOT NULL THEN 1 END
                FROM holder, recipients r
                ON CONFLICT (event_key, push_device_id) DO NOTHING
                RETURNING p.id, p.push_device_id, p.attempts, p.status
            )
            -- The columns the lease statement returns, in its order, from this statement's own rows: no table is
            -- joined again but the patient's name.
            SELECT q.id, r.id, r.token, q.attempts, e.event_key, e.patient_id, e.local_date::text, e.slot,
                   e.recording_group_id, e.taken_at, e.within_time,
                   (SELECT pt.display_name FROM caregiver_push.patients pt WHERE pt.id = e.patient_id), r.target,
                   e.recorded_by, r.language
            FROM queued q JOIN recipients r ON r.id = q.push_device_id, event e
            WHERE q.status = 'SENDING' OR \(lease?.token)::uuid IS NULL
            """
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

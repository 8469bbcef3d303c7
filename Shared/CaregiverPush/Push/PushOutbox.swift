import Libpq
import FoundationEssentials
import Logging

/// The push side of a recording transaction (docs/behaviour.md#outbox): the event and one `PENDING` delivery per
/// recipient device, written by the transaction that records the dose.
///
/// If the transaction commits, the push is owed and nothing can lose it — the post-response sender or, failing
/// that, `push-sweep` sends it. If it rolls back, nothing is owed. A conflict on (event, device) does nothing, so a
/// retried or concurrent duplicate recording still owes one delivery per device per event. A conflict on the event
/// key (two single doses of one slot taken in one minute, docs/behaviour.md#event-key) keeps the stored event and
/// AND-s its `within_time` with the new recording's, so that what a delivery still to be sent says is true of every
/// recording in the event.
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
    ///   - logger: says so when no push is owed because pushes are off: that dose will never be pushed.
    static func enqueueQuery(
        _ event: DoseTakenEvent, source: Source, configuration: Configuration, ifRecorded recorded: RecordedRow?,
        logger: Logger
    ) -> PostgresQuery? {
        if configuration.pushEnvironment == nil {
            logger.warning(
                "push not owed: PUSH_ENVIRONMENT is not DEV or PROD", metadata: ["config.variable": "PUSH_ENVIRONMENT"])
        }
        return configuration.pushEnvironment.map {
            enqueueQuery(
                event, source: source, environment: $0, deviceCap: configuration.pushMaxDevicesPerCaregiver,
                ifRecorded: recorded)
        }
    }

    /// The statement that writes `event` and its deliveries, when `recorded` (if any) exists; run inside the
    /// recording transaction.
    ///
    /// Recipients (docs/behaviour.md#outbox), decided now: caregivers actively linked to the patient, minus the
    /// caregiver who recorded; their enabled devices in `environment`, at most `deviceCap` per caregiver (the most
    /// recently seen), so that one event never owes more than `deviceCap` × linked caregivers deliveries even if the
    /// cap was exceeded before it was enforced. One statement, served by `caregiver_patient_links_active_by_patient`
    /// and `push_devices_enabled_by_owner`.
    ///
    /// Package-visible so that the tests and benchmarks queue an event with the very statement a recording runs.
    package static func enqueueQuery(
        _ event: DoseTakenEvent, source: Source, environment: Configuration.PushEnvironment, deviceCap: Int,
        ifRecorded recorded: RecordedRow?
    ) -> PostgresQuery {
        var (doseID, prnDoseID): (AppID?, AppID?) = (nil, nil)
        switch recorded {
        case .dose(let id): doseID = id
        case .prnDose(let id): prnDoseID = id
        case nil: break
        }
        return """
            WITH owed AS (
                SELECT (\(doseID)::text IS NULL AND \(prnDoseID)::text IS NULL)
                    OR EXISTS (SELECT 1 FROM caregiver_push.dose_records WHERE id = \(doseID))
                    OR EXISTS (SELECT 1 FROM caregiver_push.prn_dose_records WHERE id = \(prnDoseID)) AS owed
            ), event AS (
                INSERT INTO caregiver_push.push_events
                    (event_key, kind, source, patient_id, local_date, slot, recording_group_id, within_time, taken_at)
                SELECT \(event.eventKey), 'DOSE_TAKEN', \(source.rawValue), \(event.patientID), \(event.date)::date,
                       \(event.slot.rawValue), \(event.recordingGroupID)::text, \(event.withinTime), \(event.takenAt)
                FROM owed WHERE owed.owed
                ON CONFLICT (event_key) DO UPDATE
                    SET within_time = caregiver_push.push_events.within_time AND excluded.within_time
            )
            INSERT INTO caregiver_push.push_deliveries (event_key, push_device_id, status, next_attempt_at)
            SELECT \(event.eventKey), d.id, 'PENDING', now()
            FROM owed, caregiver_push.caregiver_patient_links l
            CROSS JOIN LATERAL (
                SELECT id FROM caregiver_push.push_devices
                WHERE owner_type = 'CAREGIVER' AND owner_id = l.caregiver_id
                  AND environment = \(environment.rawValue) AND is_enabled
                ORDER BY last_seen_at DESC, id
                LIMIT \(max(deviceCap, 1))
            ) d
            WHERE owed.owed AND l.patient_id = \(event.patientID) AND l.revoked_at IS NULL
              AND l.caregiver_id IS DISTINCT FROM \(event.actingCaregiverID)::uuid
            ON CONFLICT (event_key, push_device_id) DO NOTHING
            """
    }
}

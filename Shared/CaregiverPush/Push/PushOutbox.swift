import Libpq
import FoundationEssentials

/// The push side of a recording transaction (SPEC §9, durable delivery): the event and one `PENDING` delivery per
/// recipient device, written by the transaction that records the dose.
///
/// If the transaction commits, the push is owed and nothing can lose it — the post-response sender or, failing
/// that, `push-sweep` sends it. If it rolls back, nothing is owed. Conflicts on the event key and on (event,
/// device) do nothing, so a retried or concurrent duplicate recording still owes one delivery per device per event.
public enum PushOutbox {
    /// The function whose transaction wrote the event (stored for operators, never sent).
    public enum Source: String, Sendable {
        case doseRecord = "dose-record"
        case slotBulkRecord = "slot-bulk-record"
        case prnRecord = "prn-record"
    }

    /// Writes `event` and its deliveries when pushes are on (`PUSH_ENVIRONMENT` names the devices' environment);
    /// does nothing when it is not set.
    /// - Returns: whether an event was owed, for the post-response send.
    static func enqueue(
        _ event: DoseTakenEvent, source: Source, configuration: Configuration, connection: PostgresConnection
    ) throws -> Bool {
        guard let environment = configuration.pushEnvironment else { return false }
        try enqueue(event, source: source, environment: environment, connection: connection)
        return true
    }

    /// Writes `event` and its deliveries on `connection`, which must be inside the recording transaction.
    ///
    /// Recipients (SPEC §9.1), decided now: caregivers actively linked to the patient, minus the caregiver who
    /// recorded; their enabled devices in `environment`. One statement, served by
    /// `caregiver_patient_links_active_by_patient` and `push_devices_enabled_by_owner`.
    /// - Returns: how many deliveries this call created (0 when every recipient already owed one for this event).
    @discardableResult
    public static func enqueue(
        _ event: DoseTakenEvent, source: Source, environment: Configuration.PushEnvironment,
        connection: PostgresConnection
    ) throws -> Int {
        try connection.query(
            """
            WITH event AS (
                INSERT INTO push_events
                    (event_key, kind, source, patient_id, local_date, slot, recording_group_id, within_time, taken_at)
                VALUES (\(event.eventKey), 'DOSE_TAKEN', \(source.rawValue), \(event.patientID), \(event.date)::date,
                        \(event.slot.rawValue), \(event.recordingGroupID)::uuid, \(event.withinTime), \(event.takenAt))
                ON CONFLICT (event_key) DO NOTHING
            )
            INSERT INTO push_deliveries (event_key, push_device_id, status, next_attempt_at)
            SELECT \(event.eventKey), d.id, 'PENDING', now()
            FROM caregiver_patient_links l
            JOIN push_devices d
              ON d.owner_type = 'CAREGIVER' AND d.owner_id = l.caregiver_id
             AND d.environment = \(environment.rawValue) AND d.is_enabled
            WHERE l.patient_id = \(event.patientID) AND l.revoked_at IS NULL
              AND l.caregiver_id IS DISTINCT FROM \(event.actingCaregiverID)::uuid
            ON CONFLICT (event_key, push_device_id) DO NOTHING
            """
        ).affectedRows
    }
}

import Codecs
import FunctionRuntime
import FoundationEssentials
import Libpq

/// `POST /api/dose-records/slot` — every dose of a slot recorded as TAKEN at once (docs/behaviour.md#slot-bulk-record).
///
/// Body `{patientId?, date, slot, takenAt?}` → 200 `{recordingGroupId, updatedCount, records}`: every active,
/// scheduled medication of the patient with a schedule time in that slot on that date and not yet recorded, in one
/// transaction, under one new `recordingGroupId` (null when nothing was recorded).
public struct SlotBulkRecord: Endpoint {
    public static let function = FunctionName.slotBulkRecord
    public let method = "POST"
    /// First key of the advisory lock that serialises bulk recordings of one patient's slot.
    static let lockNamespace = 0x534C_4F54  // "SLOT"

    public init() {}

    public func handle(
        _ request: FunctionRequest, context: InvocationContext, writer: EndpointWriter<SlotRecordResponse>
    ) throws -> Responded {
        let credential = try context.authenticator.credential(
            request, database: context.database, now: context.now, logger: context.logger)
        let groupID = AppID(UUID.random())
        // Round trips: a patient's session; the lock and the slot's doses; one call that inserts them and queues the
        // push the group owes; COMMIT. Identical concurrent requests queue at the lock, so the group is recorded by
        // one of them, whole; for a caregiver the lock is taken in one statement with the link check (no lock
        // without a link), and the doses are read after it.
        let recorded = try RecordingTransaction.run(
            credential, source: .slotBulkRecord, database: context.database, configuration: context.configuration,
            logger: context.logger
        ) { transaction -> Recorded<[DoseRecordBody]> in
            let principal = try transaction.principal()
            let fields = try Self.validate(RequestBody(request), principal: principal, now: context.now)
            let (date, slot, takenAt) = (fields.date, fields.slot, fields.takenAt)
            let access = try PatientAccess.requested(principal, requestedPatientID: fields.patientID)
            transaction.grant(
                access, lock: (namespace: Self.lockNamespace, key: "\(access.patientID):\(date.text):\(slot.rawValue)"))
            var reads = transaction.flight()
            let scheduled = reads.add(Medication.scheduledDosesQuery(patientID: access.patientID, on: date))
            let read = try transaction.run(reads)
            let doses = try Medication.scheduledDoses(read[scheduled]).compactMap {
                dose -> (medicationID: AppID, scheduledAt: Date)? in
                guard Slot(minuteOfDay: dose.minuteOfDay) == slot else { return nil }
                return (dose.medicationID, DoseRules.scheduledInstant(date: date, minuteOfDay: dose.minuteOfDay))
            }
            guard !doses.isEmpty else { return .unchanged([]) }
            // Every dose's insert and the group's push, one call (migration 000022): its ids made here, and the
            // event, within time only if every dose the call records is (it says which; a dose recorded before is
            // left as it is).
            let recordIDs = doses.map { _ in AppID(UUID.random()) }
            let onTime = doses.map { DoseRules.isWithinTime(scheduledAt: $0.scheduledAt, takenAt: takenAt) }
            let event = DoseTakenEvent(
                patientID: access.patientID, date: date.text, slot: slot, recordingGroupID: groupID, takenAt: takenAt,
                withinTime: true, actingCaregiverID: access.actingCaregiverID)
            let (push, owed) = transaction.pushArguments(for: event)
            let recorder = PushOutbox.StoredRecorder(event.recorder).rawValue
            var writes = transaction.flight()
            let call = writes.add(
                """
                SELECT * FROM caregiver_push.record_slot_doses(
                    \(access.patientID)::text, \(PostgresArray.literal(doses.map(\.medicationID.text)))::text[],
                    \(PostgresArray.literal(doses.map(\.scheduledAt.postgresText)))::text[],
                    \(PostgresArray.literal(onTime.map { $0 ? "true" : "false" }))::boolean[], \(takenAt)::text,
                    \(PostgresArray.literal(recordIDs.map(\.text)))::text[], \(groupID)::text,
                    \(access.role.rawValue)::text, \(access.recorderID)::text, \(event.eventKey)::text,
                    \(date.text)::date, \(slot.rawValue)::text, \(takenAt)::timestamptz, \(recorder)::text,
                    \(event.actingCaregiverID)::uuid, \(push.environment?.rawValue)::text,
                    \(push.registrationDays)::integer, \(push.deviceCap)::integer, \(push.leaseToken)::uuid,
                    \(push.leaseSeconds)::double precision)
                """)
            let rows = try transaction.run(writes)[call]
            var records: [DoseRecordBody] = []
            for row in rows {
                // The doses it recorded, by their place in the arrays (1-based); then the deliveries it leased.
                guard let index = try row.decode(Int?.self, at: Self.recordIndexColumn) else { continue }
                guard doses.indices.contains(index - 1) else {
                    throw PostgresError(.unexpectedResult, serverMessage: "record_slot_doses answered no such dose")
                }
                let dose = doses[index - 1]
                records.append(
                    DoseRecordBody(
                        id: recordIDs[index - 1], patientID: access.patientID, medicationID: dose.medicationID,
                        scheduledAt: dose.scheduledAt, takenAt: takenAt, recordingGroupID: groupID))
            }
            guard !records.isEmpty else { return .unchanged(records) }
            transaction.leasedByCall(try rows.keeping { try $0.decode(UUID?.self, at: 0) != nil })
            return .recorded(records, owing: owed)
        }
        // Respond, then send the push the group owes (none when nothing was recorded).
        return try writer.respond(recorded) { records, _ in
            writer.note("slot recorded", ["dose.updated": .stringConvertible(records.count)])
            return SlotRecordResponse(
                recordingGroupId: records.isEmpty ? nil : groupID.text, updatedCount: records.count,
                records: records)
        }
    }

    /// Where `record_slot_doses` says which dose a row is about, after the leased delivery's columns.
    static let recordIndexColumn = 15

    /// A body that passed validation.
    struct Fields: Equatable {
        /// Absent when a patient records for itself.
        let patientID: AppID?
        let date: LocalDate
        let slot: Slot
        /// The body's `takenAt`, or now when it has none.
        let takenAt: Date
    }

    /// Checks every field and reports all invalid ones at once (422). Kept apart from `handle` so that the whole
    /// of body validation runs, and can be exercised (fuzzed), without a database.
    static func validate(_ body: RequestBody, principal: Principal, now: Date) throws(Problem) -> Fields {
        var fields = FieldValidator(body)
        let patientID = fields.patientID(for: principal)
        // Year 0000 is a date to the pattern but not to PostgreSQL: dates before 1970 are refused with the rest.
        let date = fields.string(
            "date", required: true, invalidMessage: "date must be a date (YYYY-MM-DD) from 1970-01-01 on"
        ) { (LocalDate($0)?.year ?? 0) >= 1970 }.flatMap(LocalDate.init)
        let slot = fields.oneOf("slot", Slot.self, message: "slot must be morning, noon, evening or bedtime")
        let takenAt = fields.takenAt(now: now)
        if let date, DoseRules.isFutureDate(date, now: now) {
            fields.reject("date", "date may not be after today (Asia/Tokyo)")
        }
        try fields.finish()
        guard let date, let slot else { throw .validation(fields.errors) }
        return Fields(patientID: patientID, date: date, slot: slot, takenAt: takenAt.date)
    }
}

/// `{recordingGroupId, updatedCount, records}` — slot-bulk-record.
public struct SlotRecordResponse: Codable, Sendable, Equatable {
    public let recordingGroupId: String?
    public let updatedCount: Int
    public let records: [DoseRecordBody]

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(recordingGroupId, forKey: .recordingGroupId)
        try container.encode(updatedCount, forKey: .updatedCount)
        try container.encode(records, forKey: .records)
    }
}

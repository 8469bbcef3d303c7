import FunctionRuntime
import FoundationEssentials

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
        let principal = try context.authenticator.authenticate(
            request, database: context.database, now: context.now, logger: context.logger)
        let fields = try Self.validate(RequestBody(request), principal: principal, now: context.now)
        let (date, slot, takenAt) = (fields.date, fields.slot, fields.takenAt)

        let access = try PatientAccess.requested(principal, requestedPatientID: fields.patientID)

        let groupID = AppID(UUID())
        // Round trips: the lock and the slot's doses; the inserts; the push the group owes (known only once the
        // inserts have said which doses were not recorded before); COMMIT. Identical concurrent requests queue at
        // the lock, so the group is recorded by one of them, whole; for a caregiver the lock is taken in one
        // statement with the link check (no lock without a link), and the doses are read after it.
        let lock = (namespace: Self.lockNamespace, key: "\(access.patientID):\(date.text):\(slot.rawValue)")
        let recorded = try RecordingTransaction.run(
            access, source: .slotBulkRecord, database: context.database, configuration: context.configuration,
            logger: context.logger, lock: lock
        ) { transaction -> Recorded<[DoseRecordBody]> in
            var reads = transaction.flight()
            let scheduled = reads.add(Medication.scheduledDosesQuery(patientID: access.patientID, on: date))
            let read = try transaction.run(reads)
            let doses = try Medication.scheduledDoses(read[scheduled]).compactMap {
                dose -> (medicationID: AppID, scheduledAt: Date)? in
                guard Slot(minuteOfDay: dose.minuteOfDay) == slot else { return nil }
                return (dose.medicationID, DoseRules.scheduledInstant(date: date, minuteOfDay: dose.minuteOfDay))
            }
            guard !doses.isEmpty else { return .unchanged([]) }
            var inserts = transaction.flight()
            let insertOf = doses.map { dose in
                inserts.add(
                    """
                    INSERT INTO caregiver_push.dose_records
                        (id, patient_id, medication_id, scheduled_at, taken_at, recorded_by_role, recorded_by_id,
                         recording_group_id)
                    VALUES (\(AppID(UUID())), \(access.patientID), \(dose.medicationID), \(dose.scheduledAt), \(takenAt),
                            \(access.role.rawValue), \(access.recorderID), \(groupID))
                    ON CONFLICT (patient_id, medication_id, scheduled_at) DO NOTHING
                    RETURNING id
                    """)
            }
            let inserted = try transaction.run(inserts)
            var records: [DoseRecordBody] = []
            for (dose, insert) in zip(doses, insertOf) {
                if let row = inserted[insert].single {
                    records.append(
                        DoseRecordBody(
                            id: try row.decode(AppID.self, at: 0), patientID: access.patientID,
                            medicationID: dose.medicationID, scheduledAt: dose.scheduledAt, takenAt: takenAt,
                            recordingGroupID: groupID))
                }
            }
            guard !records.isEmpty else { return .unchanged(records) }
            // The push the group owes commits with it: one event for the whole group.
            let event = DoseTakenEvent(
                patientID: access.patientID, date: date.text, slot: slot, recordingGroupID: groupID, takenAt: takenAt,
                withinTime: records.allSatisfy(\.withinTime), actingCaregiverID: access.actingCaregiverID)
            var outbox = transaction.flight()
            let owed = transaction.enqueuePush(event, in: &outbox, ifRecorded: nil)
            try transaction.run(outbox)
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

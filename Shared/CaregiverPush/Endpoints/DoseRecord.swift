import Codecs
import Libpq
import FunctionRuntime
import FoundationEssentials

/// `POST /api/dose-records` — one scheduled dose recorded as TAKEN (docs/behaviour.md#dose-record).
///
/// Body `{patientId?, medicationId, scheduledAt, takenAt?}` → 200 `{record, updatedCount}`. Recording the same
/// (patient, medication, scheduledAt) again returns the existing record with `updatedCount: 0` and sends no push.
public struct DoseRecord: Endpoint {
    public static let function = FunctionName.doseRecord
    public let method = "POST"

    public init() {}

    public func handle(
        _ request: FunctionRequest, context: InvocationContext, writer: EndpointWriter<RecordResponse<DoseRecordBody>>
    ) throws -> Responded {
        let principal = try context.authenticator.authenticate(
            request, database: context.database, now: context.now, logger: context.logger)
        let fields = try Self.validate(RequestBody(request), principal: principal, now: context.now)
        let (medicationID, scheduledAt, takenAt) = (fields.medicationID, fields.scheduledAt, fields.takenAt)

        let access = try PatientAccess.requested(principal, requestedPatientID: fields.patientID)

        // Record: one transaction — what the checks read, what is written, COMMIT: three round trips.
        let recorded = try RecordingTransaction.run(
            access, source: .doseRecord, database: context.database, configuration: context.configuration,
            logger: context.logger
        ) { transaction -> Recorded<DoseRecordBody> in
            var reads = transaction.flight()
            let medication = reads.add(Medication.findQuery(medicationID, patientID: access.patientID))
            let scheduleTime = reads.add(Medication.scheduleTimeQuery(medicationID, at: scheduledAt))
            let read = try transaction.run(reads)
            try Self.checkSchedule(
                try Medication.found(read[medication], id: medicationID), scheduledAt: scheduledAt, now: context.now,
                isScheduleTime: !read[scheduleTime].isEmpty)

            // The insert, the record as stored (this one, or the one recorded before), and the push it owes only
            // if the insert recorded it: the record's id is made here, so that the outbox statement can tell.
            let recordID = AppID(UUID())
            let storedTakenAt = try Date(postgresText: takenAt.postgresText)
            let event = DoseTakenEvent(
                patientID: access.patientID, date: TokyoClock.dateString(of: scheduledAt),
                slot: Slot(instant: scheduledAt), recordingGroupID: nil, takenAt: storedTakenAt,
                withinTime: DoseRules.isWithinTime(scheduledAt: scheduledAt, takenAt: storedTakenAt),
                actingCaregiverID: access.actingCaregiverID)
            var writes = transaction.flight()
            let inserted = writes.add(
                """
                INSERT INTO caregiver_push.dose_records
                    (id, patient_id, medication_id, scheduled_at, taken_at, recorded_by_role, recorded_by_id)
                VALUES (\(recordID), \(access.patientID), \(medicationID), \(scheduledAt), \(takenAt),
                        \(access.role.rawValue), \(access.recorderID))
                ON CONFLICT (patient_id, medication_id, scheduled_at) DO NOTHING
                RETURNING id
                """)
            let stored = writes.add(
                """
                SELECT * FROM caregiver_push.find_dose_record(
                    \(access.patientID)::text, \(medicationID)::text, \(scheduledAt)::text)
                """)
            let owed = transaction.enqueuePush(event, in: &writes, ifRecorded: .dose(recordID))
            let written = try transaction.run(writes)
            guard let row = written[stored].single else {
                throw PostgresError(.unexpectedResult, serverMessage: "dose record vanished")
            }
            let (storedID, recordedTakenAt, groupID) = try row.decode((AppID, Date, AppID?).self)
            // A repeat returns the stored record as it is, with the slot group it was recorded in.
            let record = DoseRecordBody(
                id: storedID, patientID: access.patientID, medicationID: medicationID, scheduledAt: scheduledAt,
                takenAt: recordedTakenAt, recordingGroupID: groupID)
            guard !written[inserted].isEmpty else { return .unchanged(record) }
            return .recorded(record, owing: owed)
        }
        // Respond, then send the push the recording owes (none for a repeat): the caller never waits for FCM.
        return try writer.respond(recorded) { record, recordedNow in
            let updatedCount = recordedNow ? 1 : 0
            writer.note(
                "dose recorded", ["dose.record": .string(record.id), "dose.updated": .stringConvertible(updatedCount)])
            return RecordResponse(record: record, updatedCount: updatedCount)
        }
    }

    /// A body that passed validation.
    struct Fields: Equatable {
        /// Absent when a patient records for itself.
        let patientID: AppID?
        let medicationID: AppID
        let scheduledAt: Date
        /// The body's `takenAt`, or now when it has none.
        let takenAt: Date
    }

    /// Checks every field and reports all invalid ones at once (422). Kept apart from `handle` so that the whole
    /// of body validation runs, and can be exercised (fuzzed), without a database.
    static func validate(_ body: RequestBody, principal: Principal, now: Date) throws(Problem) -> Fields {
        var fields = FieldValidator(body)
        let patientID = fields.patientID(for: principal)
        let medicationID = fields.appID("medicationId", required: true)
        let scheduledAt = fields.instant("scheduledAt", required: true)
        let takenAt = fields.takenAt(now: now, scheduledAt: scheduledAt?.date)
        try fields.finish()
        guard let medicationID, let scheduledAt else { throw .validation(fields.errors) }
        return Fields(
            patientID: patientID, medicationID: medicationID, scheduledAt: scheduledAt.date, takenAt: takenAt.date)
    }

    /// Not PRN, active on the dose's Tokyo date, `scheduledAt` one of its schedule times, the date not after today.
    /// - Parameter isScheduleTime: whether the Tokyo minute of `scheduledAt` is one of the medication's schedule
    ///   times (``Medication/scheduleTimeQuery(_:at:)`` found it).
    static func checkSchedule(_ medication: Medication, scheduledAt: Date, now: Date, isScheduleTime: Bool) throws {
        guard !medication.isPRN else {
            throw Problem.validation([
                .init(field: "medicationId", message: "medicationId must be a scheduled (not as-needed) medication")
            ])
        }
        let date = LocalDate(tokyoDateOf: scheduledAt)
        guard !DoseRules.isFutureDate(date, now: now) else {
            throw Problem.validation([
                .init(field: "scheduledAt", message: "scheduledAt may not be on a date after today (Asia/Tokyo)")
            ])
        }
        guard medication.isActive(on: date) else {
            throw Problem.validation([
                .init(field: "scheduledAt", message: "the medication is not active on the date of scheduledAt")
            ])
        }
        let minute = TokyoClock.minuteOfDay(scheduledAt)
        guard scheduledAt == DoseRules.scheduledInstant(date: date, minuteOfDay: minute), isScheduleTime else {
            throw Problem.validation([
                .init(field: "scheduledAt", message: "scheduledAt is not a scheduled time of this medication")
            ])
        }
    }
}

/// A scheduled dose recorded as TAKEN, as the API returns it.
public struct DoseRecordBody: Codable, Sendable, Equatable {
    public let id: String
    public let patientId: String
    public let medicationId: String
    public let scheduledAt: String
    public let takenAt: String
    /// Tokyo date of `scheduledAt`.
    public let date: String
    public let slot: Slot
    public let withinTime: Bool
    public let recordingGroupId: String?

    init(
        id: AppID, patientID: AppID, medicationID: AppID, scheduledAt: Date, takenAt: Date, recordingGroupID: AppID?
    ) {
        self.id = id.text
        patientId = patientID.text
        medicationId = medicationID.text
        self.scheduledAt = Timestamp.rfc3339UTC(scheduledAt)
        self.takenAt = Timestamp.rfc3339UTC(takenAt)
        date = TokyoClock.dateString(of: scheduledAt)
        slot = Slot(instant: scheduledAt)
        withinTime = DoseRules.isWithinTime(scheduledAt: scheduledAt, takenAt: takenAt)
        recordingGroupId = recordingGroupID?.text
    }

    /// Encodes `recordingGroupId` as `null` rather than leaving it out.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(patientId, forKey: .patientId)
        try container.encode(medicationId, forKey: .medicationId)
        try container.encode(scheduledAt, forKey: .scheduledAt)
        try container.encode(takenAt, forKey: .takenAt)
        try container.encode(date, forKey: .date)
        try container.encode(slot, forKey: .slot)
        try container.encode(withinTime, forKey: .withinTime)
        try container.encode(recordingGroupId, forKey: .recordingGroupId)
    }
}

/// `{record, updatedCount}` — dose-record and prn-record.
public struct RecordResponse<Record: Codable & Sendable & Equatable>: Codable, Sendable, Equatable {
    public let record: Record
    /// 1 when this request recorded it, 0 when it had been recorded before.
    public let updatedCount: Int
}

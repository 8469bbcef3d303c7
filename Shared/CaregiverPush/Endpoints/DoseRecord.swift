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
        let credential = try context.authenticator.credential(
            request, database: context.database, now: context.now, logger: context.logger)
        // Record: one transaction — a patient's session, then one call that checks, writes and queues (migration
        // 000022), then COMMIT: two round trips, three with a patient's session.
        let recorded = try RecordingTransaction.run(
            credential, source: .doseRecord, database: context.database, configuration: context.configuration,
            logger: context.logger, accessCheckedByCall: true
        ) { transaction -> Recorded<DoseRecordBody> in
            let principal = try transaction.principal()
            let fields = try Self.validate(RequestBody(request), principal: principal, now: context.now)
            let (medicationID, scheduledAt, takenAt) = (fields.medicationID, fields.scheduledAt, fields.takenAt)
            let access = try PatientAccess.requested(principal, requestedPatientID: fields.patientID)
            transaction.grant(access)
            // The record's id is made here, and the event the push is about: the call queues it only if its insert
            // recorded the dose.
            let recordID = AppID(UUID.random())
            let storedTakenAt = try Date(postgresText: takenAt.postgresText)
            let event = DoseTakenEvent(
                patientID: access.patientID, date: TokyoClock.dateString(of: scheduledAt),
                slot: Slot(instant: scheduledAt), recordingGroupID: nil, takenAt: storedTakenAt,
                withinTime: DoseRules.isWithinTime(scheduledAt: scheduledAt, takenAt: storedTakenAt),
                actingCaregiverID: access.actingCaregiverID)
            let (push, owed) = transaction.pushArguments(for: event)
            var flight = transaction.flight()
            let call = flight.add(
                Self.recordQuery(
                    access, fields: fields, recordID: recordID, event: event, push: push, now: context.now))
            let rows = try transaction.run(flight)[call]
            let answer = try Answer(rows, medicationID: medicationID)
            switch answer.outcome {
            case .notLinked: throw PatientAccess.notFound
            case .noMedication: throw UnknownMedication()
            case .refused, .recorded, .unchanged: break
            }
            guard let medication = answer.medication else {
                throw PostgresError(.unexpectedResult, serverMessage: "record_dose answered no medication")
            }
            // The checks word the 422, and stay the authority: a dose they refuse that the call recorded is rolled
            // back with the transaction.
            try Self.checkSchedule(
                medication, scheduledAt: scheduledAt, now: context.now, isScheduleTime: answer.isScheduleTime)
            guard let stored = answer.stored else {
                throw PostgresError(.unexpectedResult, serverMessage: "the call refused a dose the checks allow")
            }
            // A repeat returns the stored record as it is, with the slot group it was recorded in.
            let record = DoseRecordBody(
                id: stored.id, patientID: access.patientID, medicationID: medicationID, scheduledAt: scheduledAt,
                takenAt: stored.takenAt, recordingGroupID: stored.groupID)
            guard answer.outcome == .recorded else { return .unchanged(record) }
            transaction.leasedByCall(try rows.keeping { try $0.decode(UUID?.self, at: 0) != nil })
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

    /// The call that records the dose (`caregiver_push.record_dose`, migration 000022): a caregiver's link, the
    /// medication and whether the dose's Tokyo minute is one of its schedule times, the checks, the insert, the
    /// record as stored, the push's outbox. Everything that depends on the clock or the calendar is computed here,
    /// at `now`: the dose's Tokyo date and minute, today's date, whether `scheduledAt` is that minute exactly.
    static func recordQuery(
        _ access: PatientAccess, fields: Fields, recordID: AppID, event: DoseTakenEvent,
        push: PushOutbox.CallArguments, now: Date
    ) -> PostgresQuery {
        let scheduledAt = fields.scheduledAt
        let date = LocalDate(tokyoDateOf: scheduledAt)
        let minute = TokyoClock.minuteOfDay(scheduledAt)
        let time = Timestamp.hourMinuteText(minuteOfDay: minute) + ":00"
        let onMinute = scheduledAt == DoseRules.scheduledInstant(date: date, minuteOfDay: minute)
        let recorder = PushOutbox.StoredRecorder(event.recorder).rawValue
        return """
            SELECT * FROM caregiver_push.record_dose(
                \(access.actingCaregiverID)::text, \(access.patientID)::text, \(fields.medicationID)::text,
                \(scheduledAt)::text, \(fields.takenAt)::text, \(time)::time, \(date.text)::date,
                \(TokyoClock.dateString(of: now))::date, \(onMinute)::boolean, \(recordID)::text,
                \(access.role.rawValue)::text, \(access.recorderID)::text, \(event.eventKey)::text,
                \(event.slot.rawValue)::text, \(event.withinTime)::boolean, \(event.takenAt)::timestamptz,
                \(recorder)::text, \(event.actingCaregiverID)::uuid, \(push.environment?.rawValue)::text,
                \(push.registrationDays)::integer, \(push.deviceCap)::integer, \(push.leaseToken)::uuid,
                \(push.leaseSeconds)::double precision)
            """
    }

    /// What ``recordQuery(_:fields:recordID:event:push:now:)`` answered, from its first row (the deliveries it
    /// leased follow it, their first column set).
    struct Answer {
        enum Outcome: String {
            case notLinked = "not-linked"
            case noMedication = "no-medication"
            case refused
            case recorded
            case unchanged
        }

        let outcome: Outcome
        /// The medication's facts, for the checks; `nil` when it was not read (not linked, no such medication).
        let medication: Medication?
        let isScheduleTime: Bool
        /// The record as stored: this request's, or the one recorded before; `nil` unless recorded or unchanged.
        let stored: (id: AppID, takenAt: Date, groupID: AppID?)?

        /// Where the record's columns start, after the leased delivery's.
        private static let first = 15

        init(_ rows: PostgresRows, medicationID: AppID) throws {
            guard let row = rows.first, let outcome = Outcome(rawValue: try row.decode(String.self, at: Self.first))
            else { throw PostgresError(.unexpectedResult, serverMessage: "record_dose answered no outcome") }
            self.outcome = outcome
            isScheduleTime = try row.decode(Bool?.self, at: Self.first + 8) ?? false
            medication = try Medication.facts(row, at: Self.first + 4, id: medicationID)
            switch outcome {
            case .recorded, .unchanged:
                guard let id = try row.decode(AppID?.self, at: Self.first + 1),
                    let takenAt = try row.decode(Date?.self, at: Self.first + 2)
                else { throw PostgresError(.unexpectedResult, serverMessage: "dose record vanished") }
                stored = (id, takenAt, try row.decode(AppID?.self, at: Self.first + 3))
            case .notLinked, .noMedication, .refused:
                stored = nil
            }
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
    ///   times (the recording call read it).
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

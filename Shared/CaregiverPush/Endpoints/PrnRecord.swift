import Libpq
import OpenSSLCrypto
import FunctionRuntime
import FoundationEssentials

/// `POST /api/prn-dose-records` — an as-needed (PRN) dose recorded as taken (docs/behaviour.md#prn-record).
///
/// Body `{patientId?, medicationId, takenAt?, quantity?}`, optional `Idempotency-Key` header (a UUID, scoped to the
/// patient) → 200 `{record, updatedCount}`. Each call records a dose; a repeat with the same key returns the first
/// record with `updatedCount: 0` and no push; the same key with another medication, quantity or takenAt (compared
/// as sent) is 422.
public struct PrnRecord: Endpoint {
    public let functionName = "prn-record"
    public let method = "POST"

    public init() {}

    public func handle(
        _ request: FunctionRequest, context: InvocationContext, respond: (any Encodable & Sendable) throws -> Void
    ) throws {
        let principal = try context.authenticator.authenticate(request, context: context)
        let fields = try Self.validate(
            RequestBody(request), idempotencyKey: request.header("idempotency-key"), principal: principal,
            now: context.now)
        let (medicationID, takenAt, quantity, idempotencyKey) = (
            fields.medicationID, fields.takenAt, fields.quantity, fields.idempotencyKey
        )
        // What "the same request" means for the key: the fields as sent (an omitted takenAt matches an omitted one).
        let fingerprint = SHA256.hexPrefix(
            of: "medicationId=\(medicationID)|quantity=\(quantity.sent.map(String.init) ?? "-")"
                + "|takenAt=\(takenAt.text ?? "-")",
            length: 64)

        let access = try PatientAccess.requested(principal, requestedPatientID: fields.patientID)

        // One recording transaction: what the checks read, what is written, COMMIT — three round trips (a repeat
        // of a key: two).
        let (response, push) = try RecordingTransaction.run(access, source: .prnRecord, context: context) {
            transaction -> RecordingTransaction.Recording<RecordResponse<PRNRecordBody>> in
            var reads = transaction.flight()
            let earlierQuery = idempotencyKey.map { Self.recordedQuery(key: $0, patientID: access.patientID) }
            let earlierRead = reads.add(earlierQuery)
            let medicationRead = reads.add(Medication.findQuery(medicationID, patientID: access.patientID))
            let read = try transaction.run(reads)
            if let earlier = read[earlierRead]?.single {
                return .init(try Self.replay(earlier, fingerprint: fingerprint, patientID: access.patientID))
            }
            let medication = try Medication.found(read[medicationRead], id: medicationID)
            guard medication.isPRN else {
                throw Problem.validation([
                    .init(field: "medicationId", message: "medicationId must be an as-needed (PRN) medication")
                ])
            }
            guard medication.isActive(on: LocalDate(tokyoDateOf: takenAt.date)) else {
                throw Problem.validation([
                    .init(field: "takenAt", message: "the medication is not active on the date of takenAt")
                ])
            }

            // The insert, the earlier record should another request with this key have committed since the look-up,
            // and the push the dose owes only if the insert recorded it: the record's id is made here, so that the
            // outbox statement can tell.
            let recordID = AppID(UUID())
            let storedTakenAt = try Date(postgresText: takenAt.date.postgresText)
            // An event of its own, keyed by this record: never merged into a slot's (docs/behaviour.md#event-key).
            let event = DoseTakenEvent.prn(
                recordID: recordID, patientID: access.patientID, takenAt: storedTakenAt,
                actingCaregiverID: access.actingCaregiverID)
            var writes = transaction.flight()
            let insert = writes.add(
                """
                INSERT INTO caregiver_push.prn_dose_records
                    (id, patient_id, medication_id, taken_at, quantity, idempotency_key, request_fingerprint,
                     recorded_by_role, recorded_by_id)
                VALUES (\(recordID), \(access.patientID), \(medicationID), \(takenAt.date), \(quantity.value),
                        \(idempotencyKey), \(idempotencyKey == nil ? nil : fingerprint), \(access.role.rawValue),
                        \(access.recorderID))
                ON CONFLICT (patient_id, idempotency_key) DO NOTHING
                RETURNING id, medication_id, taken_at, quantity, request_fingerprint
                """)
            let earlierWritten = writes.add(earlierQuery)
            let owed = transaction.enqueuePush(event, in: &writes, ifRecorded: .prnDose(recordID))
            let written = try transaction.run(writes)
            guard let inserted = written[insert].single else {
                // Another request with this key committed between our look-up and our insert.
                guard let earlier = written[earlierWritten]?.single else {
                    throw PostgresError(.unexpectedResult, serverMessage: "idempotent insert found no row")
                }
                return .init(try Self.replay(earlier, fingerprint: fingerprint, patientID: access.patientID))
            }
            let record = try Self.body(inserted, patientID: access.patientID)
            context.logger.info("prn dose recorded", metadata: ["dose.record": .string(record.record.id)])
            return .init(RecordResponse(record: record.record, updatedCount: 1), owing: owed)
        }
        // Respond, then send the push the dose owes (none for a repeat of its key).
        try respond(response)
        push.dispatch()
    }

    /// A body (and `Idempotency-Key`) that passed validation.
    struct Fields {
        /// Absent when a patient records for itself.
        let patientID: AppID?
        let medicationID: AppID
        /// The body's `takenAt` (or now) and its text as sent, for the idempotency fingerprint.
        let takenAt: (date: Date, text: String?)
        let quantity: (value: Int, sent: Int?)
        let idempotencyKey: UUID?
    }

    /// Checks every field and the `Idempotency-Key` header, and reports all invalid ones at once (422). Kept apart
    /// from `handle` so that the whole of request validation runs, and can be exercised (fuzzed), without a
    /// database.
    static func validate(
        _ body: RequestBody, idempotencyKey header: String?, principal: Principal, now: Date
    ) throws(Problem) -> Fields {
        var fields = FieldValidator(body)
        let patientID = fields.patientID(for: principal)
        let medicationID = fields.appID("medicationId", required: true)
        let takenAt = fields.takenAt(now: now)
        let quantity = fields.quantity()
        var idempotencyKey: UUID?
        if let header {
            idempotencyKey = UUID(exactly: header.trimmingOptionalWhitespace())
            if idempotencyKey == nil { fields.reject("Idempotency-Key", "Idempotency-Key must be a UUID") }
        }
        try fields.finish()
        guard let medicationID else { throw .validation(fields.errors) }
        return Fields(
            patientID: patientID, medicationID: medicationID, takenAt: takenAt, quantity: quantity,
            idempotencyKey: idempotencyKey)
    }

    /// The statement that reads the record an earlier request with this key created, with its fingerprint.
    private static func recordedQuery(key: UUID, patientID: AppID) -> PostgresQuery {
        """
        SELECT id, medication_id, taken_at, quantity, request_fingerprint FROM caregiver_push.prn_dose_records
        WHERE patient_id = \(patientID) AND idempotency_key = \(key)
        """
    }

    /// A repeat: the first record and no push, or 422 when the key came with a different request.
    private static func replay(
        _ row: PostgresRow, fingerprint: String, patientID: AppID
    ) throws -> RecordResponse<PRNRecordBody> {
        let earlier = try body(row, patientID: patientID)
        guard constantTimeEquals(Array(earlier.fingerprint.utf8), Array(fingerprint.utf8)) else {
            throw Problem.unprocessable("This Idempotency-Key was already used with a different request.")
        }
        return RecordResponse(record: earlier.record, updatedCount: 0)
    }

    private static func body(
        _ row: PostgresRow, patientID: AppID
    ) throws -> (record: PRNRecordBody, fingerprint: String) {
        let (id, medicationID, takenAt, quantity) = try row.decode((AppID, AppID, Date, Int).self)
        let fingerprint = try row.decode(String?.self, at: 4) ?? ""
        return (
            PRNRecordBody(
                id: id, patientID: patientID, medicationID: medicationID, takenAt: takenAt, quantity: quantity),
            fingerprint
        )
    }
}

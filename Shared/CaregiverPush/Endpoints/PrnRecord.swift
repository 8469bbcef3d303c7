import Codecs
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
///
/// Without a key, the same body sent again within ``retryWindowSeconds`` (a network retry of an app that does not
/// send the key) is a repeat too: the request is given a key derived from the patient, the body as sent and the
/// window it arrived in (docs/behaviour.md#prn-retry).
public struct PrnRecord: Endpoint {
    public static let function = FunctionName.prnRecord
    public let method = "POST"

    /// A keyless request repeats an earlier one with the same body that arrived less than this long before it
    /// (always), or less than twice this long (when the two fall in adjacent windows); never one that arrived
    /// earlier than that.
    public static let retryWindowSeconds: Int64 = 60
    /// Namespace of the advisory lock a keyless request takes on (patient, body): two of them at once are serialised,
    /// so the second finds the first's record.
    package static let retryLockNamespace = 0x5052_4E52  // "PRNR"

    public init() {}

    public func handle(
        _ request: FunctionRequest, context: InvocationContext, writer: EndpointWriter<RecordResponse<PRNRecordBody>>
    ) throws -> Responded {
        let principal = try context.authenticator.authenticate(
            request, database: context.database, now: context.now, logger: context.logger)
        let fields = try Self.validate(
            RequestBody(request), idempotencyKey: request.header("idempotency-key"), principal: principal,
            now: context.now)
        let (medicationID, takenAt, quantity, idempotencyKey) = (
            fields.medicationID, fields.takenAt, fields.quantity, fields.idempotencyKey
        )
        let fingerprint = Self.fingerprint(medicationID: medicationID, quantity: quantity.sent, takenAt: takenAt.text)

        let access = try PatientAccess.requested(principal, requestedPatientID: fields.patientID)
        // The key the record is stored under, and the keys of the records it would repeat: the one sent, or the
        // retry window's (this window's and the one before).
        let keys =
            idempotencyKey.map { (stored: $0, repeats: [$0]) }
            ?? Self.retryKeys(patientID: access.patientID, fingerprint: fingerprint, now: context.now)
        let lock =
            idempotencyKey == nil ? (Self.retryLockNamespace, Self.retryLockKey(access.patientID, fingerprint)) : nil

        // One recording transaction: what the checks read, what is written, COMMIT — three round trips (a repeat
        // of a key: two).
        let recorded = try RecordingTransaction.run(
            access, source: .prnRecord, database: context.database, configuration: context.configuration,
            logger: context.logger, lock: lock.map { (namespace: $0.0, key: $0.1) }
        ) { transaction -> Recorded<RecordResponse<PRNRecordBody>> in
            var reads = transaction.flight()
            let earlierQuery = Self.recordedQuery(keys: keys.repeats, patientID: access.patientID)
            let earlierRead = reads.add(earlierQuery)
            let medicationRead = reads.add(Medication.findQuery(medicationID, patientID: access.patientID))
            let read = try transaction.run(reads)
            if let earlier = read[earlierRead].first {
                return .unchanged(try Self.replay(earlier, fingerprint: fingerprint, patientID: access.patientID))
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
                        \(keys.stored), \(fingerprint), \(access.role.rawValue), \(access.recorderID))
                ON CONFLICT (patient_id, idempotency_key) DO NOTHING
                RETURNING id, medication_id, taken_at, quantity, request_fingerprint
                """)
            let earlierWritten = writes.add(earlierQuery)
            let owed = transaction.enqueuePush(event, in: &writes, ifRecorded: .prnDose(recordID))
            let written = try transaction.run(writes)
            guard let inserted = written[insert].single else {
                // Another request with this key committed between our look-up and our insert.
                guard let earlier = written[earlierWritten].first else {
                    throw PostgresError(.unexpectedResult, serverMessage: "idempotent insert found no row")
                }
                return .unchanged(try Self.replay(earlier, fingerprint: fingerprint, patientID: access.patientID))
            }
            let record = try Self.body(inserted, patientID: access.patientID)
            return .recorded(RecordResponse(record: record.record, updatedCount: 1), owing: owed)
        }
        // Respond, then send the push the dose owes (none for a repeat of its key).
        return try writer.respond(recorded) { response, recordedNow in
            writer.note(
                "prn dose recorded",
                ["dose.record": .string(response.record.id), "dose.updated": .stringConvertible(recordedNow ? 1 : 0)])
            return response
        }
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

    /// The statement that reads the record an earlier request with one of these keys created, with its
    /// fingerprint (the latest, when two windows' keys both found one).
    /// The keys are sent as text and compared as the column's type inside `caregiver_push.find_prn_record`
    /// (migration 000021): the column is a uuid here and text in an app's table (docs/behaviour.md#data-contract).
    private static func recordedQuery(keys: [UUID], patientID: AppID) -> PostgresQuery {
        "SELECT * FROM caregiver_push.find_prn_record(\(patientID)::text, \(keys.first)::text, \(keys.last)::text)"
    }

    /// What "the same request" means for a key: the fields as sent (an omitted takenAt matches an omitted one).
    package static func fingerprint(medicationID: AppID, quantity: Int?, takenAt: String?) -> String {
        SHA256.hexPrefix(
            of: "medicationId=\(medicationID)|quantity=\(quantity.map(String.init) ?? "-")"
                + "|takenAt=\(takenAt ?? "-")",
            length: 64)
    }

    /// The advisory lock key of a keyless request (in ``retryLockNamespace``).
    package static func retryLockKey(_ patientID: AppID, _ fingerprint: String) -> String {
        "\(patientID):\(fingerprint)"
    }

    /// A keyless request's keys: the one its record is stored under (this retry window's) and the ones whose record
    /// it repeats (this window's and the previous one's). Each is SHA-256 of the patient, the body's fingerprint and
    /// the window's number, as an RFC 9562 version 8 UUID.
    static func retryKeys(patientID: AppID, fingerprint: String, now: Date) -> (stored: UUID, repeats: [UUID]) {
        let window = Int64((now.timeIntervalSince1970 / Double(retryWindowSeconds)).rounded(.down))
        func key(_ window: Int64) -> UUID {
            var bytes = SHA256.hash(Array("prn-retry|\(patientID)|\(fingerprint)|\(window)".utf8)).prefix(16).map { $0 }
            bytes[6] = (bytes[6] & 0x0F) | 0x80
            bytes[8] = (bytes[8] & 0x3F) | 0x80
            return UUID(
                uuid: (
                    bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
                    bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
                ))
        }
        return (key(window), [key(window), key(window - 1)])
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

/// An as-needed (PRN) dose, as the API returns it.
public struct PRNRecordBody: Codable, Sendable, Equatable {
    public let id: String
    public let patientId: String
    public let medicationId: String
    public let takenAt: String
    /// Tokyo date of `takenAt`.
    public let date: String
    /// Slot of `takenAt` in Tokyo.
    public let slot: Slot
    public let quantity: Int

    init(id: AppID, patientID: AppID, medicationID: AppID, takenAt: Date, quantity: Int) {
        self.id = id.text
        patientId = patientID.text
        medicationId = medicationID.text
        self.takenAt = Timestamp.rfc3339UTC(takenAt)
        date = TokyoClock.dateString(of: takenAt)
        slot = Slot(instant: takenAt)
        self.quantity = quantity
    }
}

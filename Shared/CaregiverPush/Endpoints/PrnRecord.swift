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
        let credential = try context.authenticator.credential(
            request, database: context.database, now: context.now, logger: context.logger)
        // One recording transaction: a patient's session, one call that checks, writes and queues (migration
        // 000022), then COMMIT.
        let recorded = try RecordingTransaction.run(
            credential, source: .prnRecord, database: context.database, configuration: context.configuration,
            logger: context.logger, accessCheckedByCall: true
        ) { transaction -> Recorded<RecordResponse<PRNRecordBody>> in
            let principal = try transaction.principal()
            let fields = try Self.validate(
                RequestBody(request), idempotencyKey: request.header("idempotency-key"), principal: principal,
                now: context.now)
            let (medicationID, takenAt, quantity, idempotencyKey) = (
                fields.medicationID, fields.takenAt, fields.quantity, fields.idempotencyKey
            )
            let fingerprint = Self.fingerprint(
                medicationID: medicationID, quantity: quantity.sent, takenAt: takenAt.text)

            let access = try PatientAccess.requested(principal, requestedPatientID: fields.patientID)
            transaction.grant(access)
            // The key the record is stored under, and the keys of the records it would repeat: the one sent, or the
            // retry window's (this window's and the one before).
            let keys =
                idempotencyKey.map { (stored: $0, repeats: [$0]) }
                ?? Self.retryKeys(patientID: access.patientID, fingerprint: fingerprint, now: context.now)
            let lock =
                idempotencyKey == nil
                ? (Self.retryLockNamespace, Self.retryLockKey(access.patientID, fingerprint)) : nil

            // The record's id is made here, and the event the push is about (of its own, keyed by this record:
            // never merged into a slot's, docs/behaviour.md#event-key): the call queues it only if it records.
            let recordID = AppID(UUID.random())
            let storedTakenAt = try Date(postgresText: takenAt.date.postgresText)
            let event = DoseTakenEvent.prn(
                recordID: recordID, patientID: access.patientID, takenAt: storedTakenAt,
                actingCaregiverID: access.actingCaregiverID)
            let (push, owed) = transaction.pushArguments(for: event)
            let recorder = PushOutbox.StoredRecorder(event.recorder).rawValue
            var flight = transaction.flight()
            let call = flight.add(
                """
                SELECT * FROM caregiver_push.record_prn(
                    \(access.actingCaregiverID)::text, \(access.patientID)::text, \(lock?.0 ?? 0)::integer,
                    \(lock?.1)::text, \(keys.repeats.first)::text, \(keys.repeats.last)::text, \(medicationID)::text,
                    \(LocalDate(tokyoDateOf: takenAt.date).text)::date, \(takenAt.date)::text, \(quantity.value)::integer,
                    \(keys.stored)::text, \(fingerprint)::text, \(recordID)::text, \(access.role.rawValue)::text,
                    \(access.recorderID)::text, \(event.eventKey)::text, \(event.slot.rawValue)::text,
                    \(event.takenAt)::timestamptz, \(recorder)::text, \(event.actingCaregiverID)::uuid,
                    \(push.environment?.rawValue)::text, \(push.registrationDays)::integer, \(push.deviceCap)::integer,
                    \(push.leaseToken)::uuid, \(push.leaseSeconds)::double precision)
                """)
            let rows = try transaction.run(flight)[call]
            guard let row = rows.first, let outcome = try row.decode(String?.self, at: Self.recordColumn) else {
                throw PostgresError(.unexpectedResult, serverMessage: "record_prn answered no outcome")
            }
            switch outcome {
            case "not-linked":
                throw PatientAccess.notFound
            case "repeat":
                return .unchanged(
                    try Self.replay(
                        row, at: Self.recordColumn + 1, fingerprint: fingerprint, patientID: access.patientID))
            case "no-medication":
                throw UnknownMedication()
            case "refused", "recorded":
                break
            default:
                throw PostgresError(.unexpectedResult, serverMessage: "record_prn answered an unknown outcome")
            }
            // The checks word the 422s and stay the authority: a dose they refuse that the call recorded is rolled
            // back with the transaction.
            guard let medication = try Medication.facts(row, at: Self.recordColumn + 6, id: medicationID) else {
                throw PostgresError(.unexpectedResult, serverMessage: "record_prn answered no medication")
            }
            try Self.checkMedication(medication, takenAt: takenAt.date)
            guard outcome == "recorded" else {
                throw PostgresError(.unexpectedResult, serverMessage: "the call refused a dose the checks allow")
            }
            let record = try Self.body(row, at: Self.recordColumn + 1, patientID: access.patientID)
            transaction.leasedByCall(try rows.keeping { try $0.decode(UUID?.self, at: 0) != nil })
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

    /// Where `record_prn`'s outcome is, after the leased delivery's columns; the record's columns follow it.
    static let recordColumn = 15

    /// As-needed, and active on the Tokyo date of `takenAt` (422 otherwise).
    static func checkMedication(_ medication: Medication, takenAt: Date) throws {
        guard medication.isPRN else {
            throw Problem.validation([
                .init(field: "medicationId", message: "medicationId must be an as-needed (PRN) medication")
            ])
        }
        guard medication.isActive(on: LocalDate(tokyoDateOf: takenAt)) else {
            throw Problem.validation([
                .init(field: "takenAt", message: "the medication is not active on the date of takenAt")
            ])
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
        _ row: PostgresRow, at column: Int, fingerprint: String, patientID: AppID
    ) throws -> RecordResponse<PRNRecordBody> {
        let earlier = try body(row, at: column, patientID: patientID)
        guard constantTimeEquals(Array(earlier.fingerprint.utf8), Array(fingerprint.utf8)) else {
            throw Problem.unprocessable("This Idempotency-Key was already used with a different request.")
        }
        return RecordResponse(record: earlier.record, updatedCount: 0)
    }

    /// The record in `row`'s columns from `column` on: id, medication, takenAt, quantity, fingerprint.
    private static func body(
        _ row: PostgresRow, at column: Int, patientID: AppID
    ) throws -> (record: PRNRecordBody, fingerprint: String) {
        let id = try row.decode(AppID.self, at: column)
        let medicationID = try row.decode(AppID.self, at: column + 1)
        let takenAt = try row.decode(Date.self, at: column + 2)
        let quantity = try row.decode(Int.self, at: column + 3)
        let fingerprint = try row.decode(String?.self, at: column + 4) ?? ""
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

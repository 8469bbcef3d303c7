@testable import Libpq
import OpenSSLCrypto
@testable import CaregiverPush
import Foundation
import Testing
import TestFixtures
import TestSupport

/// How many times each function waits for the database per request, on a warm connection; and the concurrency
/// that the fewer round trips must keep.
@Suite("round trips per request")
struct RoundTripTests {
    /// Invokes `endpoint` as ``invoke(_:event:environment:)`` does, on a session that is already connected (as a
    /// warm process's is), and counts the round trips of the request up to its response (the post-response push
    /// comes after it).
    static func countedInvoke(
        _ endpoint: some Endpoint, event: Data, environment: [String: String] = testEnvironment()
    ) throws -> (invocation: Invocation, roundTrips: Int) {
        var connection: PostgresConnection?
        var (before, atResponse) = (0, 0)
        let invocation = try invokeInProcess(
            endpoint, event: event, environment: environment,
            prepare: {
                connection = try $0.connection()
                before = connection?.roundTrips ?? 0
            },
            inspect: { session in
                let current = try session.connection()
                #expect(current === connection, "the invocation reconnected")
                atResponse = current.roundTrips
            })
        return (invocation, atResponse - before)
    }

    static func pushEvents(patient: UUID) throws -> Int {
        try TestDatabase.with {
            try $0.query("SELECT count(*) FROM push_events WHERE patient_id = \(patient)")[0].decode(Int.self, at: 0)
        }
    }

    @Test("push-register: two round trips (lock, upsert, rotation and hand-over in one flight; COMMIT)")
    func register() throws {
        let body = json([
            "token": .string(makeDeviceToken()), "platform": .string("ios"), "environment": .string("DEV"),
            "installationId": .string("install-\(UUID().uuidString)"),
        ])
        let (result, trips) = try Self.countedInvoke(
            PushRegister(), event: makeEvent(bearer: try caregiverToken(UUID()), body: body))
        #expect(result.status == 200)
        #expect(trips == 2)
    }

    @Test(
        "dose-record: two round trips for a caregiver (the call; COMMIT), one more for a patient's session; a repeat two"
    )
    func doseRecord() throws {
        let fixture = try DoseRecordTests.fixture()
        let forCaregiver = DoseRecordTests.body(fixture, time: "08:00", patient: fixture.patient)
        let (first, caregiverTrips) = try Self.countedInvoke(
            DoseRecord(), event: makeEvent(bearer: try caregiverToken(fixture.caregiver), body: json(forCaregiver)))
        #expect(first.status == 200 && first.json?["updatedCount"] == .number(1))
        #expect(caregiverTrips == 2)
        let (own, patientTrips) = try Self.countedInvoke(
            DoseRecord(),
            event: makeEvent(bearer: fixture.patientToken, body: json(DoseRecordTests.body(fixture, time: "20:00"))))
        #expect(own.status == 200 && own.json?["updatedCount"] == .number(1))
        #expect(patientTrips == 3)
        let (again, repeatTrips) = try Self.countedInvoke(
            DoseRecord(), event: makeEvent(bearer: try caregiverToken(fixture.caregiver), body: json(forCaregiver)))
        #expect(again.json?["updatedCount"] == .number(0))
        #expect(repeatTrips == 2)
    }

    @Test("prn-record: three round trips with the patient's session (session; one call; COMMIT), a repeat too")
    func prnRecord() throws {
        let household = try SlotAndPRNRecordTests.prnHousehold()
        let key = UUID().uuidString
        let event = makeEvent(
            bearer: household.token, body: json(["medicationId": .string(household.prn.uuidString)]),
            extraHeaders: ["idempotency-key": key])
        let (first, trips) = try Self.countedInvoke(PrnRecord(), event: event)
        #expect(first.status == 200 && first.json?["updatedCount"] == .number(1))
        #expect(trips == 3)
        let (again, repeatTrips) = try Self.countedInvoke(PrnRecord(), event: event)
        #expect(again.json?["updatedCount"] == .number(0))
        #expect(repeatTrips == 3)
    }

    @Test("slot-bulk-record: four round trips with the patient's session (session; lock and doses; one call; COMMIT)")
    func slotBulkRecord() throws {
        let household = try SlotAndPRNRecordTests.household()
        let event = makeEvent(
            bearer: household.token,
            body: json(["date": .string(TokyoDay.offset(-1)), "slot": .string("morning")]))
        let (first, trips) = try Self.countedInvoke(SlotBulkRecord(), event: event)
        #expect(first.status == 200 && first.json?["updatedCount"] == .number(3))
        #expect(trips == 4)
        let (again, repeatTrips) = try Self.countedInvoke(SlotBulkRecord(), event: event)
        #expect(again.json?["updatedCount"] == .number(0))
        #expect(repeatTrips == 4)
    }

    @Test("a registration that waits for the token's lock sees the registration that held it, and takes the token over")
    func handOverAfterLockWait() throws {
        let token = makeDeviceToken()
        let (first, second) = (UUID(), UUID())
        _ = TestDatabase.migrated
        // The first caregiver's registration caught mid-transaction: the token's lock held, its row written.
        let holder = try LockHolder()
        defer { holder.release() }
        try holder.connection.query(
            "SELECT pg_advisory_xact_lock(\(PushDeviceRegistry.tokenLockNamespace), hashtext(\(token)))")
        try holder.connection.query(
            """
            INSERT INTO push_devices (owner_type, owner_id, token, token_sha256, platform, environment)
            VALUES ('CAREGIVER', \(first), \(token), \(PushDeviceRegistry.tokenHash(token)), 'ios', 'DEV')
            """)
        let bearer = try caregiverToken(second)
        let body = json(["token": .string(token), "platform": .string("ios"), "environment": .string("DEV")])
        let registration = Background { invoke(PushRegister(), event: makeEvent(bearer: bearer, body: body)) }
        #expect(try eventually(seconds: 10) { try holder.isBlockingSomeone }, "the second registration never waited")
        try holder.connection.query("COMMIT")
        #expect(registration.wait().status == 200)
        let devices = try TestDatabase.with { try Seed.devices($0, token: token) }
        #expect(devices.filter(\.isEnabled).map(\.ownerID) == [second])
        #expect(devices.first { $0.ownerID == first }?.disabledReason == "TOKEN_REASSIGNED")
    }

    @Test("a repeated dose with another takenAt owes no push: the outbox statement sent with the insert writes nothing")
    func repeatOwesNothing() throws {
        let fixture = try DoseRecordTests.fixture()
        let first = DoseRecordTests.record(
            fixture.patientToken, DoseRecordTests.body(fixture, takenAt: TokyoDay.instant(fixture.date, "08:10")))
        #expect(first.json?["updatedCount"] == .number(1))
        #expect(try Self.pushEvents(patient: fixture.patient) == 1)
        let again = DoseRecordTests.record(
            fixture.patientToken, DoseRecordTests.body(fixture, takenAt: TokyoDay.instant(fixture.date, "08:40")))
        #expect(again.json?["updatedCount"] == .number(0))
        #expect(try Self.pushEvents(patient: fixture.patient) == 1)
    }

    @Test("prn-record whose key another request commits while it waits: that record, updatedCount 0, no push owed")
    func prnKeyCommittedMeanwhile() throws {
        let household = try SlotAndPRNRecordTests.prnHousehold()
        let key = UUID()
        let fingerprint = SHA256.hexPrefix(
            of: "medicationId=\(household.prn.uuidString.lowercased())|quantity=-|takenAt=-", length: 64)
        // The other request, mid-transaction: its record written with the key, not committed.
        let holder = try LockHolder()
        defer { holder.release() }
        let earlier = try holder.connection.query(
            """
            INSERT INTO prn_dose_records
                (patient_id, medication_id, taken_at, quantity, idempotency_key, request_fingerprint, recorded_by_role,
                 recorded_by_id)
            VALUES (\(household.patient), \(household.prn), now(), 1, \(key), \(fingerprint), 'PATIENT',
                    \(household.patient))
            RETURNING id
            """)[0].decode(UUID.self, at: 0)
        let event = makeEvent(
            bearer: household.token, body: json(["medicationId": .string(household.prn.uuidString)]),
            extraHeaders: ["idempotency-key": key.uuidString])
        let request = Background { invoke(PrnRecord(), event: event) }
        #expect(try eventually(seconds: 10) { try holder.isBlockingSomeone }, "the request never waited for the key")
        try holder.connection.query("COMMIT")
        let result = request.wait()
        #expect(result.status == 200)
        #expect(result.json?["updatedCount"] == .number(0))
        #expect(result.json?["record"]?["id"] == .string(earlier.uuidString.lowercased()))
        #expect(try Self.pushEvents(patient: household.patient) == 0)
    }

    @Test("a caregiver without a link is refused without waiting for the slot's lock (it never takes it)")
    func slotLockNeedsLink() throws {
        let household = try SlotAndPRNRecordTests.household()
        let date = TokyoDay.offset(-1)
        let holder = try LockHolder()
        defer { holder.release() }
        try holder.connection.query(
            """
            SELECT pg_advisory_xact_lock(\(SlotBulkRecord.lockNamespace),
                                         hashtext(\("\(household.patient):\(date):morning")))
            """)
        let body = json([
            "patientId": .string(household.patient.uuidString), "date": .string(date), "slot": .string("morning"),
        ])
        let bearer = try caregiverToken(UUID())
        let request = Background {
            invoke(
                SlotBulkRecord(), event: makeEvent(bearer: bearer, body: body),
                environment: testEnvironment(["DATABASE_LOCK_TIMEOUT_MS": "10000"]))
        }
        // Had it taken the lock first, it would be waiting behind the holder (until the holder lets go).
        #expect(request.wait(seconds: 5)?.status == 404)
    }
}

/// Work on a thread of its own, for a test that must act while the work waits; ``wait()`` returns its result.
final class Background<Value>: @unchecked Sendable {
    private var value: Value?
    private let finished = DispatchSemaphore(value: 0)

    init(_ work: @escaping @Sendable () -> Value) {
        Thread.detachNewThread {
            self.value = work()
            self.finished.signal()
        }
    }

    func wait() -> Value {
        finished.wait()
        return value!
    }

    /// The result, or `nil` when the work is still running after `seconds`.
    func wait(seconds: Double) -> Value? {
        guard finished.wait(timeout: .now() + seconds) == .success else { return nil }
        return value
    }
}

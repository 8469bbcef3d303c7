@testable import CaregiverPush
import Foundation
import Libpq
import Logging
import Testing
import TestSupport

/// Corrections (docs/behaviour.md#corrections) against a real database, step by step, with the statements the
/// senders and the recordings run: a delivery sent, or being sent, from an older revision of its event is owed again,
/// whichever of the recording and the sender gets there first.
@Suite("corrections: a merge that changes the text owes every phone already told the truth")
struct CorrectionTests {
    struct Home {
        let patient: UUID
        let key: String
        let database: DatabaseSession
        let configuration: Configuration

        /// Queues one single dose of the event, as a recording does.
        func record(withinTime: Bool, byCaregiver: UUID? = nil, connection: PostgresConnection) throws {
            let event = DoseTakenEvent(
                patientID: AppID(patient), date: "2026-02-11", slot: .noon, recordingGroupID: nil,
                takenAt: Date(timeIntervalSince1970: 1_770_780_610), withinTime: withinTime,
                actingCaregiverID: byCaregiver)
            #expect(event.eventKey == key)
            try connection.withTransaction { connection in
                _ = try PushOutbox.enqueue(
                    event, source: .doseRecord, environment: .development, connection: connection)
            }
        }

        func row() throws -> (status: String, attempts: Int, sentRevision: Int?, revision: Int) {
            try TestDatabase.with { connection in
                let row = try #require(
                    try connection.query(
                        """
                        SELECT p.status, p.attempts, p.sent_revision, e.revision
                        FROM push_deliveries p JOIN push_events e USING (event_key) WHERE p.event_key = \(key)
                        """
                    ).first)
                return try row.decode((String, Int, Int?, Int).self)
            }
        }

        func lease() throws -> (token: UUID, deliveries: [LeasedDelivery]) {
            try DeliveryQueue.lease(eventKey: key, limit: 10, configuration: configuration, database: database)
        }

        func sent(_ lease: (token: UUID, deliveries: [LeasedDelivery])) -> Int? {
            DeliveryQueue.record(
                lease.deliveries.map {
                    DeliveryOutcome(delivery: $0, status: .sent, attempts: $0.attempts, messageName: "projects/p/m")
                }, lease: lease.token, database: database, logger: Logger(label: "corrections"))
        }
    }

    static func home() throws -> Home {
        let (patient, caregiver) = try TestDatabase.with { connection in
            let patient = try Seed.patient(connection)
            let caregiver = UUID()
            try Seed.link(connection, caregiver: caregiver, patient: patient)
            try Seed.registerDevice(makeDeviceToken(), caregiver: caregiver, connection: connection)
            return (patient, caregiver)
        }
        _ = caregiver
        let configuration = Configuration(environment: testEnvironment())
        return Home(
            patient: patient, key: "doseTaken:\(patient.uuidString.lowercased()):2026-02-11:noon:12:30",
            database: DatabaseSession(url: TestDatabase.url), configuration: configuration)
    }

    @Test("sent, then a late dose joins: the delivery is owed again, due now, attempts from zero, worded anew")
    func sentThenRevised() throws {
        let home = try Self.home()
        try TestDatabase.with { try home.record(withinTime: true, connection: $0) }
        let first = try home.lease()
        #expect(first.deliveries.map(\.event.withinTime) == [true])
        #expect(home.sent(first) == 1)
        #expect(try home.row().status == "SENT")
        // A second dose of the same minute, on time too, or recorded by a caregiver: the text does not change
        // (the patient's words are true of both), nothing is owed.
        try TestDatabase.with { try home.record(withinTime: true, connection: $0) }
        try TestDatabase.with { try home.record(withinTime: true, byCaregiver: UUID(), connection: $0) }
        #expect(try home.row().status == "SENT" && home.row().revision == 1)
        // A late one: revision 2, the delivery owed again.
        try TestDatabase.with { try home.record(withinTime: false, connection: $0) }
        let reopened = try home.row()
        #expect(reopened.status == "PENDING" && reopened.attempts == 0 && reopened.revision == 2)
        let second = try home.lease()
        #expect(second.deliveries.map(\.event.withinTime) == [false])
        #expect(home.sent(second) == 1)
        #expect(try home.row().status == "SENT" && home.row().sentRevision == 2)
    }

    @Test("being sent when the patient's dose joins a caregiver's: the lease is dropped, the delivery owed again")
    func inFlightThenRevised() throws {
        let home = try Self.home()
        try TestDatabase.with { try home.record(withinTime: true, byCaregiver: UUID(), connection: $0) }
        let lease = try home.lease()
        #expect(try home.row().status == "SENDING")
        // "A caregiver recorded" is no longer true of the event: the text changes.
        try TestDatabase.with { try home.record(withinTime: true, connection: $0) }
        #expect(try home.row().status == "PENDING" && home.row().revision == 2)
        // The in-flight sender's outcome finds its lease gone and changes nothing.
        #expect(home.sent(lease) == 0)
        #expect(try home.row().status == "PENDING")
        #expect(try home.lease().deliveries.map(\.event.recorder) == [.both])
    }

    @Test("a send worded from an older revision than the event's when its outcome is recorded is not SENT")
    func outcomeSeesNewerRevision() throws {
        let home = try Self.home()
        try TestDatabase.with { try home.record(withinTime: true, connection: $0) }
        let lease = try home.lease()
        // What a lease that read the event just before a revision committed holds: revision 1, while the event
        // is at 2 (the recording's rewrite of the row came before this lease, so it cannot drop it).
        try TestDatabase.with { connection in
            try connection.query(
                "UPDATE push_events SET revision = 2, within_time = false WHERE event_key = \(home.key)")
        }
        #expect(home.sent(lease) == 1)
        let row = try home.row()
        #expect(row.status == "PENDING" && row.attempts == 0 && row.sentRevision == 1)
    }

    @Test("while a revising recording is uncommitted, a lease skips the event's PENDING rows")
    func revisionHoldsPendingRows() throws {
        let home = try Self.home()
        try TestDatabase.with { try home.record(withinTime: true, connection: $0) }
        let first = try home.lease()
        #expect(home.sent(first) == 1)
        // A second device joins (PENDING, never leased); then a revising recording stays open.
        try TestDatabase.with { connection in
            let caregiver = UUID()
            try Seed.link(connection, caregiver: caregiver, patient: home.patient)
            try Seed.registerDevice(makeDeviceToken(), caregiver: caregiver, connection: connection)
        }
        try TestDatabase.with { try home.record(withinTime: true, connection: $0) }
        let open = try TestDatabase.connect()
        try open.query("BEGIN")
        let event = DoseTakenEvent(
            patientID: AppID(home.patient), date: "2026-02-11", slot: .noon, recordingGroupID: nil,
            takenAt: Date(timeIntervalSince1970: 1_770_780_610), withinTime: false, actingCaregiverID: nil)
        _ = try PushOutbox.enqueue(event, source: .doseRecord, environment: .development, connection: open)
        #expect(try home.lease().deliveries.isEmpty)
        try open.query("COMMIT")
        let after = try home.lease()
        #expect(after.deliveries.count == 2 && after.deliveries.allSatisfy { !$0.event.withinTime })
    }
}

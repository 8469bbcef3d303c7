@testable import CaregiverPush
import Foundation
import Libpq
import Testing
import TestSupport

/// What a lease checks again when it sends (docs/behaviour.md#leases): a recording's recipients are decided when it
/// commits, but a caregiver whose link the app revoked since is sent nothing more about that patient.
@Suite("leases re-check the link")
struct LeaseRecheckTests {
    @Test("a link revoked after the recording: its caregiver's queued push is never leased; another's is")
    func revokedLink() throws {
        let (patient, kept, revoked) = try TestDatabase.with { connection in
            let patient = try Seed.patient(connection)
            let (kept, revoked) = (UUID(), UUID())
            for caregiver in [kept, revoked] {
                try Seed.link(connection, caregiver: caregiver, patient: patient)
                try Seed.registerDevice(makeDeviceToken(), caregiver: caregiver, connection: connection)
            }
            return (patient, kept, revoked)
        }
        let event = DoseTakenEvent(
            patientID: AppID(patient), date: "2026-02-11", slot: .noon, recordingGroupID: AppID(UUID()),
            takenAt: Date(timeIntervalSince1970: 1_770_780_610), withinTime: true, actingCaregiverID: nil)
        try TestDatabase.with { connection in
            let owed = try connection.withTransaction { connection in
                try PushOutbox.enqueue(
                    event, source: .slotBulkRecord, environment: .development, connection: connection)
            }
            #expect(owed == 2)
            try connection.query(
                "UPDATE caregiver_patient_links SET revoked_at = now() WHERE caregiver_id = \(revoked)")
        }
        let lease = try DeliveryQueue.lease(
            eventKey: event.eventKey, limit: 10, configuration: Configuration(environment: testEnvironment()),
            database: DatabaseSession(url: TestDatabase.url))
        let owners = try TestDatabase.with { connection in
            try lease.deliveries.map { delivery in
                try connection.query("SELECT owner_id FROM push_devices WHERE id = \(delivery.deviceID)")[0]
                    .decode(UUID.self, at: 0)
            }
        }
        #expect(owners == [kept])
    }
}

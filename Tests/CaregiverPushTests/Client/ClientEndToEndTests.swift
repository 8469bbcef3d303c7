import CaregiverPush
import CaregiverPushClient
import Foundation
import Testing

/// The whole loop on Linux: the caregiver's app (this library) turns push on against a real `runner serve` with the
/// FCM emulator and PostgreSQL, the patient records a dose over HTTP, and what FCM received, delivered to the app as
/// iOS would, opens History at that dose's date and slot. Then push off, and the next dose reaches the phone no more.
@MainActor
@Suite("client: end to end against the runner")
struct ClientEndToEndTests {
    @Test("push on → a dose → the delivered push routes to its date and slot; push off → the next dose sends nothing")
    func pushOnDoseRoutesPushOffSilent() async throws {
        let server = try RunnerServer.forClient()
        // A patient with doses at 13:00 (noon) and 21:00 (bedtime) two days ago, the app's caregiver, and another
        // caregiver's phone as a witness that a push did go out.
        let date = TokyoDay.offset(-2)
        let app = CaregiverApp(baseURL: server.baseURL)
        let witnessToken = makeDeviceToken()
        let (patientToken, medication) = try TestDatabase.with { connection in
            let patient = try Seed.patient(connection, displayName: "山田花子")
            try Seed.link(connection, caregiver: app.caregiver, patient: patient)
            let witness = UUID()
            try Seed.link(connection, caregiver: witness, patient: patient)
            try PushDispatchTests.register(witnessToken, caregiver: witness, connection: connection)
            let medication = try Seed.medication(connection, patient: patient, times: ["13:00", "21:00"])
            return (try Seed.session(connection, patient: patient), medication)
        }
        await app.settings.setPushEnabled(true)
        #expect(app.settings.isPushEnabled && app.settings.errorMessage == nil)

        let dose = try server.post(
            "/api/dose-records", bearer: patientToken,
            body: [
                "medicationId": .string(medication.uuidString), "scheduledAt": .string(TokyoDay.instant(date, "21:00")),
            ])
        #expect(dose.status == 200 && dose.json?["record"]?["slot"] == .string("bedtime"))
        let delivered = try server.fcmMessages(to: app.tokenSource.token, atLeast: 1)
        #expect(delivered.count == 1)
        let message = try #require(delivered.first?["message"])
        let userInfo = iOSUserInfo(fromFCM: message, messageName: delivered.first?["name"]?.stringValue)
        let router = NotificationDeepLinkRouter()
        router.route(userInfo: userInfo, identifier: UUID().uuidString)
        #expect(router.target == NotificationDeepLinkTarget(dateKey: date, slot: .bedtime))
        #expect((userInfo["aps"] as? [String: Any])?["thread-id"] as? String != nil)

        await app.settings.setPushEnabled(false)
        #expect(!app.settings.isPushEnabled && app.settings.errorMessage == nil)
        let second = try server.post(
            "/api/dose-records", bearer: patientToken,
            body: [
                "medicationId": .string(medication.uuidString), "scheduledAt": .string(TokyoDay.instant(date, "13:00")),
            ])
        #expect(second.status == 200 && second.json?["updatedCount"] == .number(1))
        // The witness got both doses' pushes, so the second dispatch is over; the app's phone got only the first.
        #expect(try server.fcmMessages(to: witnessToken, atLeast: 2).count == 2)
        #expect(try server.fcmMessages(to: app.tokenSource.token).count == 1)
    }
}

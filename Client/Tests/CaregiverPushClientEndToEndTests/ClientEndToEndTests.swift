import CaregiverPushClient
import CaregiverPushClientTestSupport
import Foundation
import Testing

/// The whole loop on Linux: the caregiver's app (this kit) turns push on against a real `runner serve` with the FCM
/// emulator and PostgreSQL, a patient records a dose over HTTP, and what FCM received, delivered to the app as iOS
/// would, opens that patient's History at that dose's date and slot — tapped from the background, from a cold start,
/// or from the in-app banner in the foreground. Then push off, and the next dose reaches the phone no more.
@MainActor
@Suite("kit: end to end against the runner", .timeLimit(.minutes(2)))
struct ClientEndToEndTests {
    /// A caregiver of two patients, each with doses at 13:00 (noon) and 21:00 (bedtime).
    struct Household {
        let first: UUID
        let second: UUID
        let secondSession: String
        let secondMedication: UUID
    }

    static func household(caregiver: UUID) throws -> Household {
        try TestDatabase.with { database in
            let first = try Seed.patient(database, displayName: "山田花子")
            let second = try Seed.patient(database, displayName: "山田太郎")
            try Seed.link(database, caregiver: caregiver, patient: first)
            try Seed.link(database, caregiver: caregiver, patient: second)
            _ = try Seed.medication(database, patient: first, times: ["13:00", "21:00"])
            let medication = try Seed.medication(database, patient: second, times: ["13:00", "21:00"])
            return Household(
                first: first, second: second, secondSession: try Seed.session(database, patient: second),
                secondMedication: medication)
        }
    }

    @Test(
        "two patients: the second's dose → its push → a tap (background, cold start, in-app banner) selects the second patient, then its date and slot"
    )
    func twoPatientsRouteToTheRightHistory() async throws {
        let server = try RunnerServer.forClient()
        let app = CaregiverApp(baseURL: server.baseURL)
        let home = try Self.household(caregiver: app.caregiver)
        let date = TokyoDay.offset(-2)
        await app.settings.setPushEnabled(true)
        #expect(app.settings.isPushEnabled && app.settings.errorState == nil)

        let dose = try await server.post(
            "/api/dose-records", bearer: home.secondSession,
            body: [
                "medicationId": home.secondMedication.uuidString.lowercased(),
                "scheduledAt": TokyoDay.instant(date, "21:00"),
            ])
        #expect(dose.status == 200 && (dose.json?["record"] as? [String: Any])?["slot"] as? String == "bedtime")
        let delivered = try await server.fcmMessages(to: app.tokenSource.token, atLeast: 1)
        #expect(delivered.count == 1)
        let message = try #require(delivered.first?["message"] as? [String: Any])
        let userInfo = iOSUserInfo(fromFCM: message, messageName: delivered.first?["name"] as? String)
        let (first, second) = (home.first.uuidString.lowercased(), home.second.uuidString.lowercased())
        let linked: Set = [first, second]
        let expected = CaregiverPushNavigation(selectPatient: second, dateKey: date, slot: .bedtime)

        // Background: the app runs, the first patient's screens are showing.
        let router = CaregiverPushDeepLinkRouter()
        #expect(router.route(userInfo: userInfo, identifier: UUID().uuidString))
        #expect(router.takeNavigation(selectedPatientID: first, linkedPatientIDs: linked) == expected)
        #expect(router.pending == nil)

        // Cold start: the tap arrives before any screen (and before a patient is selected); it waits.
        let coldRouter = CaregiverPushDeepLinkRouter()
        coldRouter.route(userInfo: userInfo, identifier: UUID().uuidString)
        #expect(coldRouter.pending?.patientID == second)
        #expect(coldRouter.takeNavigation(selectedPatientID: nil, linkedPatientIDs: linked) == expected)

        // Foreground: the in-app banner instead of the system's, and its tap routes the same way.
        let foregroundRouter = CaregiverPushDeepLinkRouter()
        let presenter = CaregiverPushForegroundPresenter(
            router: foregroundRouter, strings: CaregiverPushStrings(language: "ja"))
        let decision = CaregiverPushForegroundDecision(userInfo: userInfo)
        #expect(presenter.present(decision, mode: app.lifecycle.mode) == [.list, .sound])
        let banner = try #require(presenter.banner)
        // The server's text, worded exactly as the kit's catalog words it.
        let strings = CaregiverPushStrings(language: "ja")
        #expect(
            banner.title == strings(.pushTitle)
                && banner.body == strings.doseTakenBody(displayName: "山田太郎", withinTime: false))
        #expect(banner.accessibilityLabel.contains(banner.body) && !banner.accessibilityHint.isEmpty)
        #expect(presenter.tapBanner())
        #expect(
            foregroundRouter.takeNavigation(selectedPatientID: first, linkedPatientIDs: linked) == expected)

        // Off: the next dose reaches this phone no more.
        await app.settings.setPushEnabled(false)
        #expect(!app.settings.isPushEnabled && app.settings.errorState == nil)
        let nextDose = try await server.post(
            "/api/dose-records", bearer: home.secondSession,
            body: [
                "medicationId": home.secondMedication.uuidString.lowercased(),
                "scheduledAt": TokyoDay.instant(date, "13:00"),
            ])
        #expect(nextDose.status == 200 && nextDose.json?["updatedCount"] as? Int == 1)
        // Give the dispatch the time the first one needed; the phone still has exactly one message.
        try await Task.sleep(for: .seconds(1))
        #expect(try await server.fcmMessages(to: app.tokenSource.token).count == 1)
    }
}

import CaregiverPushClient
import CaregiverPushClientTestSupport
import Foundation
import Testing

/// Patient mode and sign-out: patient mode has no push settings and never registers; signing out unregisters first
/// and forgets local state even when the server cannot be reached, and says so.
@MainActor
@Suite("kit: patient mode and sign-out", .timeLimit(.minutes(2)))
struct PatientModeAndSignOutTests {
    @Test("patient mode: no settings, the toggle, launch, token callbacks and re-checks register nothing")
    func patientModeNeverRegisters() async throws {
        let server = try RunnerServer.forClient()
        let app = CaregiverApp(baseURL: server.baseURL)
        app.lifecycle.setMode(.patient)
        #expect(!app.settings.isAvailable)
        await app.settings.setPushEnabled(true)
        #expect(!app.settings.isPushEnabled && app.permission.requests == 0 && app.tokenSource.requests == 0)
        await app.lifecycle.applicationDidLaunch()
        await app.lifecycle.tokenDidRefresh(makeDeviceToken())
        #expect(try await app.lifecycle.registerIfNeeded(token: app.tokenSource.token) == false)
        #expect(await app.settings.recheck() == .notApplicable)
        #expect(server.registrations() == 0)
        #expect(try TestDatabase.with { try Seed.devices($0, owner: app.caregiver) }.isEmpty)
        app.lifecycle.setMode(.caregiver(app.caregiver))
        #expect(app.settings.isAvailable)
    }

    @Test(
        "sign-out unregisters the phone while the session works, then forgets the local state (the install id stays)"
    )
    func signOut() async throws {
        let server = try RunnerServer.forClient()
        let app = await CaregiverApp.enabled(baseURL: server.baseURL)
        let installation = app.lifecycle.installationId
        #expect(await app.settings.signOut() == .unregistered)
        #expect(!app.settings.isPushEnabled && !app.settings.isUpdating)
        #expect(app.store.values.isEmpty)
        #expect(app.keychain.values[PushTokenLifecycle.StateKey.installationId] == installation)
        let rows = try TestDatabase.with { try Seed.devices($0, owner: app.caregiver) }
        #expect(rows.map(\.isEnabled) == [false] && rows.first?.disabledReason == "USER_DISABLED")
        #expect(await CaregiverApp(baseURL: server.baseURL).settings.signOut() == .nothingRegistered)
    }

    @Test(
        "sign-out with a dead network: local state forgotten anyway, and the outcome says the server was not told")
    func signOutDeadNetwork() async throws {
        let server = try RunnerServer.forClient()
        let app = await CaregiverApp.enabled(baseURL: server.baseURL)
        #expect(server.stop() == 0)
        let outcome = await app.settings.signOut()
        #expect(outcome == .forgottenLocally(.retry))
        #expect(!app.settings.isPushEnabled && app.store.values.isEmpty)
        #expect(app.store.values[PushTokenLifecycle.StateKey.pendingUnregisterToken] == nil)
        let text = CaregiverPushSettingsText(strings: CaregiverPushStrings(language: "ja"))
        #expect(text.message(for: outcome)?.contains("ログアウトしました") == true)
        // The server was never told: the row is still enabled (the next account on the phone takes it over).
        #expect(try TestDatabase.with { try Seed.devices($0, owner: app.caregiver) }.map(\.isEnabled) == [true])
    }
}

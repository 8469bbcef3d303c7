import CaregiverPushClient
import CaregiverPushClientTestSupport
import Foundation
import Testing

/// The toggle's six cases, with fakes for permission, token and store only: `push/register` and
/// `push/unregister` go over HTTP to a real `runner serve`, and the test reads what they did from PostgreSQL.
///
/// Serialized: the cases fix the token to "test-token", and the server hands a token registered by one caregiver over
/// to the next (`TOKEN_REASSIGNED`), so two of these at once would disturb each other's rows.
@MainActor
@Suite("kit: the push toggle", .serialized, .timeLimit(.minutes(2)))
struct CaregiverPushSettingsTests {
    @Test("initially isPushEnabled = false (default OFF) and isUpdating = false")
    func initialState() throws {
        let app = CaregiverApp(baseURL: try SilentListener().url)
        #expect(app.settings.isPushEnabled == false)
        #expect(app.settings.isUpdating == false)
        #expect(app.settings.errorState == nil)
    }

    @Test(
        "toggle ON → updating, permission granted, token test-token registered with platform and environment → ON"
    )
    func toggleOn() async throws {
        let server = try RunnerServer.forClient()
        let app = CaregiverApp(baseURL: server.baseURL, token: "test-token")
        var updatingWhenAsked: Bool?
        app.permission.onRequest = { updatingWhenAsked = app.settings.isUpdating }
        let change = Task { await app.settings.setPushEnabled(true) }
        await Task.yield()
        #expect(app.settings.isUpdating == true)
        await change.value
        #expect(app.permission.requests == 1 && updatingWhenAsked == true)
        #expect(app.tokenSource.requests == 1)
        #expect(
            app.settings.isPushEnabled == true && app.settings.isUpdating == false && app.settings.errorState == nil
        )
        let rows = try TestDatabase.with { try Seed.devices($0, owner: app.caregiver) }
        #expect(rows.count == 1)
        #expect(
            rows.first?.token == "test-token" && rows.first?.platform == "ios" && rows.first?.environment == "DEV")
        #expect(rows.first?.isEnabled == true && rows.first?.installationID == app.lifecycle.installationId)
        #expect(app.store.values[PushTokenLifecycle.StateKey.isPushEnabled] == "true")
    }

    @Test("toggle OFF → updating, unregister with the token → OFF")
    func toggleOff() async throws {
        let server = try RunnerServer.forClient()
        let app = CaregiverApp(baseURL: server.baseURL, token: "test-token")
        await app.settings.setPushEnabled(true)
        #expect(app.settings.isPushEnabled)
        let change = Task { await app.settings.setPushEnabled(false) }
        await Task.yield()
        #expect(app.settings.isUpdating == true)
        await change.value
        #expect(
            app.settings.isPushEnabled == false && app.settings.isUpdating == false
                && app.settings.errorState == nil)
        let rows = try TestDatabase.with { try Seed.devices($0, owner: app.caregiver) }
        #expect(rows.count == 1 && rows.first?.token == "test-token")
        #expect(rows.first?.isEnabled == false && rows.first?.disabledReason == "USER_DISABLED")
        #expect(app.store.values[PushTokenLifecycle.StateKey.isPushEnabled] == nil)
        #expect(app.store.values[PushTokenLifecycle.StateKey.registeredToken] == nil)
    }

    @Test(
        "permission denied → stays OFF with a message; nothing stored, no token asked for, nothing sent")
    func permissionDenied() async throws {
        let server = try RunnerServer.forClient()
        let app = CaregiverApp(baseURL: server.baseURL, granted: false)
        await app.settings.setPushEnabled(true)
        #expect(app.settings.isPushEnabled == false && app.settings.isUpdating == false)
        #expect(
            app.settings.errorState == .permissionDenied && app.settings.errorState?.action == .openSystemSettings)
        #expect(app.tokenSource.requests == 0)
        // Nothing but whose the (empty) state is.
        #expect(Array(app.store.values.keys) == [PushTokenLifecycle.StateKey.caregiverID])
        #expect(try TestDatabase.with { try Seed.devices($0, owner: app.caregiver) }.isEmpty)
        #expect(server.registrations() == 0)
    }

    @Test("a network error while registering → stays OFF, not updating, with a message")
    func networkError() async throws {
        let closed = try SilentListener()
        closed.close()
        let app = CaregiverApp(baseURL: closed.url)
        await app.settings.setPushEnabled(true)
        #expect(app.settings.isPushEnabled == false && app.settings.isUpdating == false)
        #expect(app.settings.errorState == .retry && app.settings.errorState?.action == .retry)
        #expect(app.store.values[PushTokenLifecycle.StateKey.isPushEnabled] == nil)
    }

    @Test("the persisted state is restored on init (UserDefaults)")
    func persistedStateRestored() async throws {
        let server = try RunnerServer.forClient()
        let suite = "caregiver-push-tests-\(UUID().uuidString)"
        defer { UserDefaults(suiteName: suite)?.removePersistentDomain(forName: suite) }
        let first = CaregiverApp(baseURL: server.baseURL)
        let firstLifecycle = PushTokenLifecycle(
            api: first.api, environment: .dev, tokenSource: first.tokenSource,
            store: UserDefaultsPushStateStore(defaults: try #require(UserDefaults(suiteName: suite))))
        firstLifecycle.setMode(.caregiver(first.caregiver))
        await CaregiverPushSettingsModel(lifecycle: firstLifecycle, permission: first.permission).setPushEnabled(
            true)
        // The next launch: new objects over the same defaults.
        let relaunched = PushTokenLifecycle(
            api: first.api, environment: .dev, tokenSource: FakeTokenSource("unused"),
            store: UserDefaultsPushStateStore(defaults: try #require(UserDefaults(suiteName: suite))))
        relaunched.setMode(.caregiver(first.caregiver))
        let restored = CaregiverPushSettingsModel(lifecycle: relaunched, permission: FakePermission(granted: false))
        #expect(restored.isPushEnabled == true && restored.isUpdating == false)
        #expect(relaunched.installationId == firstLifecycle.installationId)
    }

    @Test("a server error while turning OFF → stays ON with a message; the device stays registered")
    func serverErrorWhileTurningOff() async throws {
        let server = try RunnerServer.forClient()
        let app = CaregiverApp(baseURL: server.baseURL)
        await app.settings.setPushEnabled(true)
        #expect(server.stop() == 0)
        await app.settings.setPushEnabled(false)
        #expect(app.settings.isPushEnabled == true && app.settings.isUpdating == false)
        #expect(app.settings.errorState == .retry)
        #expect(try TestDatabase.with { try Seed.devices($0, owner: app.caregiver) }.first?.isEnabled == true)
    }
}

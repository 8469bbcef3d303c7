import CaregiverPushClient
import CaregiverPushClientTestSupport
import Foundation
import Testing

/// The token lifecycle's gates (docs/app-integration.md), against a real `runner serve`.
@MainActor
@Suite("kit: token lifecycle", .timeLimit(.minutes(2)))
struct PushTokenLifecycleTests {
    /// A runner whose database is unreachable: every function answers 503 with `Retry-After`.
    nonisolated static func serverWithoutDatabase() throws -> RunnerServer {
        try RunnerServer.forClient(
            environment: testEnvironment([
                "DATABASE_URL": "postgresql://postgres@127.0.0.1:1/none?connect_timeout=2"
            ]))
    }

    @Test("three launches with the same token → one registration, one row")
    func repeatedLaunches() async throws {
        let server = try RunnerServer.forClient()
        let app = CaregiverApp(baseURL: server.baseURL)
        await app.settings.setPushEnabled(true)
        let firstSeen = try TestDatabase.with { try Seed.devices($0, owner: app.caregiver) }.first?.lastSeenAt
        for _ in 0..<3 {
            await app.lifecycle.applicationDidLaunch()
            await app.lifecycle.tokenDidRefresh(app.tokenSource.token)
        }
        #expect(server.registrations(atLeast: 1) == 1)
        let rows = try TestDatabase.with { try Seed.devices($0, owner: app.caregiver) }
        #expect(rows.count == 1 && rows.first?.isEnabled == true && rows.first?.lastSeenAt == firstSeen)
    }

    @Test("a launch and two token callbacks at once register once: never two registrations in flight")
    func concurrentTriggers() async throws {
        let server = try RunnerServer.forClient()
        let app = CaregiverApp(baseURL: server.baseURL)
        await app.settings.setPushEnabled(true)
        // Old enough to be renewed, so each of the three would register on its own.
        app.clock.current += PushTokenLifecycle.refreshInterval + 60
        let token = app.tokenSource.token
        async let launch: Void = app.lifecycle.applicationDidLaunch()
        async let first: Void = app.lifecycle.tokenDidRefresh(token)
        async let second: Void = app.lifecycle.tokenDidRefresh(token)
        _ = await (launch, first, second)
        #expect(server.registrations(atLeast: 2) == 2)
    }

    @Test("a registration older than a day is renewed on the next launch; a younger one is not")
    func monthlyRenewal() async throws {
        let server = try RunnerServer.forClient()
        let app = CaregiverApp(baseURL: server.baseURL)
        await app.settings.setPushEnabled(true)
        app.clock.current += PushTokenLifecycle.refreshInterval - 3600
        await app.lifecycle.applicationDidLaunch()
        #expect(server.registrations(atLeast: 1) == 1)
        app.clock.current += 7200
        await app.lifecycle.applicationDidLaunch()
        #expect(server.registrations(atLeast: 2) == 2)
        await app.lifecycle.applicationDidLaunch()
        #expect(server.registrations(atLeast: 2) == 2)
    }

    @Test("a failed registration (503) is retried on the next launch, which registers the token")
    func failedRegistrationRetried() async throws {
        let down = try Self.serverWithoutDatabase()
        let up = try RunnerServer.forClient()
        let before = await CaregiverApp.enabled(baseURL: up.baseURL)
        let store = before.store
        // The token rotates while the server cannot store it.
        let failing = before.relaunched(baseURL: down.baseURL, token: makeDeviceToken())
        await #expect(throws: PushAPIError.unavailable(retryAfterSeconds: 5)) {
            try await failing.lifecycle.registerIfNeeded(token: failing.tokenSource.token)
        }
        #expect(store.values[PushTokenLifecycle.StateKey.lastAttemptFailed] == "true")
        // The next launch, with the server back: same persisted state, the token FCM now gives.
        let next = failing.relaunched(baseURL: up.baseURL)
        #expect(next.settings.isPushEnabled)
        await next.lifecycle.applicationDidLaunch()
        let rows = try TestDatabase.with { try Seed.devices($0, owner: before.caregiver) }
        #expect(rows.map(\.token) == [before.tokenSource.token, next.tokenSource.token])
        #expect(rows.map(\.isEnabled) == [false, true] && rows.first?.disabledReason == "REPLACED")
        #expect(store.values[PushTokenLifecycle.StateKey.lastAttemptFailed] == nil)
    }

    @Test("a failed renewal of the same token is retried at the next launch, not only a day later")
    func failedRenewalRetried() async throws {
        let up = try RunnerServer.forClient()
        let before = await CaregiverApp.enabled(baseURL: up.baseURL)
        let (store, clock) = (before.store, before.clock)
        let down = try Self.serverWithoutDatabase()
        let failing = before.relaunched(baseURL: down.baseURL)
        clock.current += PushTokenLifecycle.refreshInterval + 60
        await failing.lifecycle.applicationDidLaunch()
        #expect(store.values[PushTokenLifecycle.StateKey.lastAttemptFailed] == "true")
        // Back within the day of the last success (the clock went back, as a phone's may): only the failure
        // flag says to register.
        clock.current -= PushTokenLifecycle.refreshInterval
        let next = before.relaunched(baseURL: up.baseURL)
        await next.lifecycle.applicationDidLaunch()
        #expect(up.registrations(atLeast: 2) == 2)
        #expect(store.values[PushTokenLifecycle.StateKey.lastAttemptFailed] == nil)
    }

    @Test(
        "reinstall: the new token registers with the kept installationId and the old row is REPLACED, not duplicated"
    )
    func reinstall() async throws {
        let server = try RunnerServer.forClient()
        let keychain = MemoryStore()
        let installed = CaregiverApp(baseURL: server.baseURL, keychain: keychain)
        await installed.settings.setPushEnabled(true)
        // Delete and reinstall: UserDefaults are gone, the Keychain is not, FCM issues a new token, iOS asks again.
        let reinstalled = CaregiverApp(
            baseURL: server.baseURL, caregiver: installed.caregiver, token: makeDeviceToken(), keychain: keychain)
        #expect(reinstalled.settings.isPushEnabled == false)
        await reinstalled.settings.setPushEnabled(true)
        #expect(reinstalled.tokenSource.token != installed.tokenSource.token)
        #expect(reinstalled.lifecycle.installationId == installed.lifecycle.installationId)
        let rows = try TestDatabase.with { try Seed.devices($0, owner: installed.caregiver) }
        #expect(rows.map(\.token) == [installed.tokenSource.token, reinstalled.tokenSource.token])
        #expect(rows.map(\.isEnabled) == [false, true])
        #expect(rows.first?.disabledReason == "REPLACED")
        #expect(Set(rows.map(\.installationID)) == [installed.lifecycle.installationId])
    }

    @Test("the installationId is made once per install and kept; a launch with push off sends nothing")
    func installationIdAndOff() async throws {
        let server = try RunnerServer.forClient()
        let app = CaregiverApp(baseURL: server.baseURL)
        let id = app.lifecycle.installationId
        #expect(UUID(uuidString: id) != nil && app.lifecycle.installationId == id)
        #expect(app.keychain.values[PushTokenLifecycle.StateKey.installationId] == id)
        await app.lifecycle.applicationDidLaunch()
        await app.lifecycle.tokenDidRefresh(makeDeviceToken())
        #expect(app.tokenSource.requests == 0)
        #expect(server.registrations() == 0)
    }
}

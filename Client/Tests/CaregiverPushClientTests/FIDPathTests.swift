import CaregiverPushClient
import CaregiverPushClientTestSupport
import Foundation
import Testing

/// The FID path (an app with `FirebaseMessagingInstallationIdEnabled`) beside the token path, server-free: the
/// lifecycle registers, re-registers and unregisters the identity it was given, by its kind, with the installation id
/// it keeps; an app updated from tokens to FIDs moves its registration to the FID; and the API client sends `fid`, not
/// `token`.
@MainActor
@Suite("kit: the FID path and the token path")
struct FIDPathTests {
    static let fid = "cT3aZ9xQ-1b2c3d4e5f6g7"

    @Test("the FID path: turned on, the FID registers with the installation id; a launch sends nothing more")
    func fidPath() async {
        let api = StubPushAPI()
        let installations = MemoryStore()
        let lifecycle = PushTokenLifecycle(
            api: api, environment: .prod, registrationSource: FakeFIDSource(Self.fid), store: MemoryStore(),
            installationStore: installations)
        let settings = CaregiverPushSettingsModel(lifecycle: lifecycle, permission: FakePermission(granted: true))
        lifecycle.setMode(.caregiver(UUID()))
        await settings.setPushEnabled(true)
        await lifecycle.applicationDidLaunch()
        let installation = lifecycle.installationId
        #expect(
            await api.calls == [.registerFID(fid: Self.fid, environment: .prod, installationId: installation)])
        // A new FID (the app's data cleared) registers; turning push off unregisters the FID, never a token.
        await lifecycle.registrationDidChange(.fid("new-fid-0123456789abcd"))
        await settings.setPushEnabled(false)
        #expect(
            await api.calls.suffix(2) == [
                .registerFID(fid: "new-fid-0123456789abcd", environment: .prod, installationId: installation),
                .unregisterFID(fid: "new-fid-0123456789abcd"),
            ])
    }

    @Test("the registration carries the phone's language; another language, or a day's age, registers again")
    func languageAndRenewal() async {
        let api = StubPushAPI()
        let (store, installations, clock) = (MemoryStore(), MemoryStore(), MovableClock())
        let caregiver = UUID()
        let english = PushTokenLifecycle(
            api: api, environment: .prod, registrationSource: FakeFIDSource(Self.fid), store: store,
            installationStore: installations, clock: clock, language: "en")
        english.setMode(.caregiver(caregiver))
        await CaregiverPushSettingsModel(lifecycle: english, permission: FakePermission(granted: true))
            .setPushEnabled(true)
        await english.applicationDidLaunch()
        #expect(await api.languages == ["en"])
        // The phone switched to Japanese (iOS relaunches the app): the next launch registers the new language.
        let japanese = PushTokenLifecycle(
            api: api, environment: .prod, registrationSource: FakeFIDSource(Self.fid), store: store,
            installationStore: installations, clock: clock, language: "ja")
        japanese.setMode(.caregiver(caregiver))
        await japanese.applicationDidLaunch()
        #expect(await api.languages == ["en", "ja"])
        // Within a day nothing more; a day on, the registration is renewed (the server's bound is counted from it).
        clock.current += PushTokenLifecycle.refreshInterval - 60
        await japanese.applicationDidLaunch()
        #expect(await api.languages == ["en", "ja"])
        clock.current += 120
        await japanese.applicationDidLaunch()
        #expect(await api.languages == ["en", "ja", "ja"])
        #expect(PushTokenLifecycle.refreshInterval <= 24 * 60 * 60)
    }

    @Test("the token path is as before: its token registers, and unregisters by token")
    func tokenPath() async {
        let api = StubPushAPI()
        let lifecycle = PushTokenLifecycle(
            api: api, environment: .dev, tokenSource: FakeTokenSource("fcm-token-1"), store: MemoryStore(),
            installationStore: MemoryStore())
        let settings = CaregiverPushSettingsModel(lifecycle: lifecycle, permission: FakePermission(granted: true))
        lifecycle.setMode(.caregiver(UUID()))
        await settings.setPushEnabled(true)
        await settings.setPushEnabled(false)
        #expect(
            await api.calls == [
                .register(token: "fcm-token-1", environment: .dev, installationId: lifecycle.installationId),
                .unregister(token: "fcm-token-1"),
            ])
    }

    @Test("an app updated from tokens to FIDs: the next launch registers the FID with the same installation id")
    func tokenToFID() async {
        let api = StubPushAPI()
        let (store, installations) = (MemoryStore(), MemoryStore())
        let caregiver = UUID()
        let before = PushTokenLifecycle(
            api: api, environment: .prod, tokenSource: FakeTokenSource("fcm-token-1"), store: store,
            installationStore: installations)
        before.setMode(.caregiver(caregiver))
        await CaregiverPushSettingsModel(lifecycle: before, permission: FakePermission(granted: true))
            .setPushEnabled(true)
        let installation = before.installationId
        // The updated app: the same stores, the FID source.
        let after = PushTokenLifecycle(
            api: api, environment: .prod, registrationSource: FakeFIDSource(Self.fid), store: store,
            installationStore: installations)
        after.setMode(.caregiver(caregiver))
        await after.applicationDidLaunch()
        #expect(
            await api.calls == [
                .register(token: "fcm-token-1", environment: .prod, installationId: installation),
                .registerFID(fid: Self.fid, environment: .prod, installationId: installation),
            ])
        #expect(after.installationId == installation)
        // From then on the FID is what the kit knows: a launch sends nothing, turning off unregisters the FID.
        await after.applicationDidLaunch()
        await CaregiverPushSettingsModel(lifecycle: after, permission: FakePermission(granted: true))
            .setPushEnabled(false)
        #expect(await api.calls.last == .unregisterFID(fid: Self.fid))
        #expect(await api.calls.count == 3)
    }

    @Test("the API client sends the FID as fid, with no token, to register, read the status and unregister")
    func clientBodies() async throws {
        let server = try CannedHTTPServer(answers: [
            .ok, .init(status: 200, body: #"{"ok":true,"device":{"enabled":true,"disabledReason":null}}"#), .ok,
        ])
        let api = PushAPIClient(baseURL: server.url) { "bearer" }
        try await api.register(.fid(Self.fid), environment: .prod, installationId: "install-1")
        _ = try await api.deviceStatus(.fid(Self.fid), environment: .prod, installationId: "install-1")
        try await api.unregister(.fid(Self.fid))
        let bodies = server.requests.map {
            try? JSONSerialization.jsonObject(with: Data($0.body.utf8)) as? [String: Any]
        }
        #expect(bodies.count == 3)
        #expect(bodies.allSatisfy { $0?["fid"] as? String == Self.fid && $0?["token"] == nil })
        #expect(bodies.first??["installationId"] as? String == "install-1")
        #expect(bodies[1]?["statusOnly"] as? Bool == true)
    }

    @Test("a stand-in written before FIDs refuses the FID path with a validation error naming fid")
    func preFIDStandIn() async {
        struct TokensOnly: PushAPI {
            func register(token: String, environment: PushEnvironment, installationId: String?)
                async throws(PushAPIError)
            {}
            func unregister(token: String) async throws(PushAPIError) {}
            func deviceStatus(token: String, environment: PushEnvironment, installationId: String?)
                async throws(PushAPIError) -> CaregiverPushDeviceStatus?
            { nil }
        }
        await #expect(throws: PushAPIError.validation([.init(field: "fid", message: "this PushAPI has no FID calls")]))
        {
            try await TokensOnly().register(.fid(Self.fid), environment: .dev, installationId: nil)
        }
        // Its token calls still work through the new entry point.
        try? await TokensOnly().register(.token("t"), environment: .dev, installationId: nil)
    }
}

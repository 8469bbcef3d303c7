import CaregiverPushClient
import Foundation
import Testing

// Written as the app's code would be: the conformances of docs/app-integration.md, with in-memory stand-ins for
// UNUserNotificationCenter, Firebase Messaging and UserDefaults.

@MainActor
final class AllowingPermission: NotificationPermission {
    func requestAuthorization() async throws -> Bool { true }
}

@MainActor
final class FixedToken: PushTokenSource {
    func currentToken() async throws -> String { "consumer-token" }
}

@MainActor
final class Defaults: PushStateStore {
    var values: [String: String] = [:]
    func string(forKey key: String) -> String? { values[key] }
    func set(_ value: String?, forKey key: String) { values[key] = value }
}

@MainActor
@Suite("CaregiverPushClient, imported as the app imports it")
struct PublicAPITests {
    @Test("a tapped DOSE_TAKEN push and a local reminder both route, through the public router")
    func routing() {
        let router = NotificationDeepLinkRouter()
        router.route(
            userInfo: [
                DoseTakenPayload.Key.type: DoseTakenPayload.type, DoseTakenPayload.Key.date: "2026-02-11",
                DoseTakenPayload.Key.slot: Slot.noon.rawValue, "aps": ["sound": "default"],
            ],
            identifier: "ignored")
        #expect(router.target == NotificationDeepLinkTarget(dateKey: "2026-02-11", slot: .noon))
        router.clear()
        router.route(userInfo: [:], identifier: "notif:2026-02-11:bedtime:2")
        #expect(router.target?.slot == .bedtime)
        #expect(PushDeepLink.target(remotePush: ["type": "DOSE_TAKEN", "date": "2026-02-31", "slot": "noon"]) == nil)
    }

    @Test("the toggle, the lifecycle and the API client can be built and wired from outside the package")
    func wiring() async {
        let api = PushAPIClient(baseURL: URL(string: "http://127.0.0.1:9")!, timeout: 2) { "caregiver-jwt" }
        let defaults = Defaults()
        let lifecycle = PushTokenLifecycle(
            api: api, environment: .dev, tokenSource: FixedToken(), store: defaults, installationStore: Defaults(),
            clock: SystemPushClock())
        let settings = CaregiverPushSettingsModel(lifecycle: lifecycle, permission: AllowingPermission())
        #expect(!settings.isPushEnabled && !settings.isUpdating && settings.errorMessage == nil)
        #expect(lifecycle.environment == .dev && !lifecycle.installationId.isEmpty)
        // Nothing listens on the discard port: the toggle stays off and says why.
        await settings.setPushEnabled(true)
        #expect(!settings.isPushEnabled && settings.errorMessage != nil)
        #expect(defaults.values[PushTokenLifecycle.StateKey.lastAttemptFailed] == "true")
        let error: PushAPIError = .unavailable(retryAfterSeconds: 5)
        #expect(!error.userMessage.isEmpty && PushTokenLifecycle.refreshInterval == 30 * 24 * 60 * 60)
        _ = UserDefaultsPushStateStore(defaults: .standard)
    }
}

import CaregiverPushClient
import CaregiverPushClientTestSupport
import Foundation

// The glue between the kit, the phone's stand-ins (CaregiverPushClientTestSupport) and a real
// `runner serve --fcm-emulator`. Everything else is real: HTTP, the runner, its functions, PostgreSQL, the FCM
// emulator.

/// One caregiver's app against a real runner: the API client with the caregiver's bearer token, and the lifecycle and
/// settings model over the phone's stand-ins.
@MainActor
struct CaregiverApp {
    let caregiver: UUID
    let api: PushAPIClient
    let tokenSource: FakeTokenSource
    let permission: FakePermission
    let store: MemoryStore
    let keychain: MemoryStore
    let clock: MovableClock
    let lifecycle: PushTokenLifecycle
    let settings: CaregiverPushSettingsModel

    init(
        baseURL: URL, caregiver: UUID = UUID(), token: String = makeDeviceToken(), granted: Bool = true,
        store: MemoryStore = MemoryStore(), keychain: MemoryStore = MemoryStore(),
        clock: MovableClock = MovableClock(),
        permission: FakePermission? = nil, budget: CaregiverPushRequestBudget = .standard
    ) {
        self.caregiver = caregiver
        let bearer = try? caregiverToken(caregiver)
        self.api = PushAPIClient(baseURL: baseURL, budget: budget) {
            guard let bearer else { throw CocoaError(.userCancelled) }
            return bearer
        }
        self.tokenSource = FakeTokenSource(token)
        self.permission = permission ?? FakePermission(granted: granted)
        self.store = store
        self.keychain = keychain
        self.clock = clock
        self.lifecycle = PushTokenLifecycle(
            api: api, environment: .dev, tokenSource: tokenSource, store: store, installationStore: keychain,
            clock: clock)
        self.settings = CaregiverPushSettingsModel(lifecycle: lifecycle, permission: self.permission)
        lifecycle.setMode(.caregiver(caregiver))
    }

    /// A new app against `baseURL` whose caregiver has turned push on.
    static func enabled(baseURL: URL) async -> CaregiverApp {
        let app = CaregiverApp(baseURL: baseURL)
        await app.settings.setPushEnabled(true)
        return app
    }

    /// The same installation launched again (same caregiver, persisted state, Keychain, clock and Settings-app
    /// switch), against `baseURL`, with the token FCM gives it now.
    func relaunched(baseURL: URL, token: String? = nil) -> CaregiverApp {
        CaregiverApp(
            baseURL: baseURL, caregiver: caregiver, token: token ?? tokenSource.token, store: store,
            keychain: keychain,
            clock: clock, permission: permission)
    }
}

/// The `userInfo` iOS hands the app for an FCM message with a notification: FCM's `data` keys at the top level,
/// `aps` from `apns.payload.aps` plus the `alert` made from `notification`, and FCM's own `gcm.message_id`.
func iOSUserInfo(fromFCM message: [String: Any], messageName: String?) -> [AnyHashable: Any] {
    var userInfo: [AnyHashable: Any] = [:]
    for (key, value) in message["data"] as? [String: Any] ?? [:] { userInfo[key] = value }
    var aps = ((message["apns"] as? [String: Any])?["payload"] as? [String: Any])?["aps"] as? [String: Any] ?? [:]
    if let notification = message["notification"] { aps["alert"] = notification }
    userInfo["aps"] = aps
    userInfo["gcm.message_id"] = messageName.map { String($0.split(separator: "/").last ?? "") } ?? "0:0"
    userInfo["google.c.a.e"] = "1"
    return userInfo
}

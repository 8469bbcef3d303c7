import CaregiverPushClient
import Foundation

// The stand-ins the kit's tests may use are the phone's own pieces — permission, FCM token source, store, clock —
// and the glue between the kit and a real `runner serve --fcm-emulator`. Everything else is real: HTTP, the runner,
// its functions, PostgreSQL, the FCM emulator.

/// Answers the permission prompt as told, reports the Settings app's switch as told, and notes what the model
/// showed while asking.
@MainActor
final class FakePermission: NotificationPermission {
    var granted: Bool
    /// What `notificationSettings()` reports; the Settings app's switch.
    var status: CaregiverPushPermissionStatus
    private(set) var requests = 0
    /// Read at the moment permission is requested (the toggle's cases check `isUpdating` there).
    var onRequest: () -> Void = {}

    init(granted: Bool) {
        self.granted = granted
        self.status = granted ? .allowed : .notDetermined
    }

    func requestAuthorization() async throws -> Bool {
        requests += 1
        onRequest()
        status = granted ? .allowed : .denied
        return granted
    }

    func authorizationStatus() async -> CaregiverPushPermissionStatus { status }
}

/// Gives the token it holds, as `Messaging.messaging().token()` would.
@MainActor
final class FakeTokenSource: PushTokenSource {
    var token: String
    private(set) var requests = 0

    init(_ token: String) { self.token = token }

    func currentToken() async throws -> String {
        requests += 1
        return token
    }
}

/// `UserDefaults` (or the Keychain) in memory; a reinstall is a new `MemoryStore`.
@MainActor
final class MemoryStore: PushStateStore {
    private(set) var values: [String: String]

    init(_ values: [String: String] = [:]) { self.values = values }

    func string(forKey key: String) -> String? { values[key] }
    func set(_ value: String?, forKey key: String) { values[key] = value }
}

/// A clock the test moves.
final class MovableClock: PushClock, @unchecked Sendable {
    // @unchecked: the tests move it only from the main actor, between awaited calls.
    var current = Date(timeIntervalSince1970: 1_790_000_000)
    func now() -> Date { current }
}

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
        store: MemoryStore = MemoryStore(), keychain: MemoryStore = MemoryStore(), clock: MovableClock = MovableClock(),
        permission: FakePermission? = nil, budget: CaregiverPushRequestBudget = .sc001
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
            baseURL: baseURL, caregiver: caregiver, token: token ?? tokenSource.token, store: store, keychain: keychain,
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

import Codecs
import CaregiverPush
import CaregiverPushClient
import Foundation

// The fakes the issue allows — permission, token source, store, clock — and the glue between the client and a real
// `runner serve --fcm-emulator`. Everything else in the client tests is real: HTTP, the runner, PostgreSQL.

/// Answers the permission prompt as told, and notes what the model showed while asking.
@MainActor
final class FakePermission: NotificationPermission {
    var granted: Bool
    private(set) var requests = 0
    /// Read at the moment permission is requested (the seeds check `isUpdating` there).
    var onRequest: () -> Void = {}

    init(granted: Bool) { self.granted = granted }

    func requestAuthorization() async throws -> Bool {
        requests += 1
        onRequest()
        return granted
    }
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
/// settings model over fakes for the phone.
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
        store: MemoryStore = MemoryStore(), keychain: MemoryStore = MemoryStore(), clock: MovableClock = MovableClock()
    ) {
        self.caregiver = caregiver
        let bearer = try? caregiverToken(caregiver)
        self.api = PushAPIClient(baseURL: baseURL, timeout: 10) {
            guard let bearer else { throw CocoaError(.userCancelled) }
            return bearer
        }
        self.tokenSource = FakeTokenSource(token)
        self.permission = FakePermission(granted: granted)
        self.store = store
        self.keychain = keychain
        self.clock = clock
        self.lifecycle = PushTokenLifecycle(
            api: api, environment: .dev, tokenSource: tokenSource, store: store, installationStore: keychain,
            clock: clock)
        self.settings = CaregiverPushSettingsModel(lifecycle: lifecycle, permission: permission)
    }

    /// A new app against `baseURL` whose caregiver has turned push on.
    static func enabled(baseURL: URL) async -> CaregiverApp {
        let app = CaregiverApp(baseURL: baseURL)
        await app.settings.setPushEnabled(true)
        return app
    }

    /// The same installation launched again (same caregiver, persisted state, Keychain and clock), against
    /// `baseURL`, with the token FCM gives it now.
    func relaunched(baseURL: URL, token: String? = nil) -> CaregiverApp {
        CaregiverApp(
            baseURL: baseURL, caregiver: caregiver, token: token ?? tokenSource.token, store: store, keychain: keychain,
            clock: clock)
    }
}

extension RunnerServer {
    /// A cold `runner serve --fcm-emulator` against the test database, `PUSH_ENVIRONMENT=DEV`.
    static func forClient(environment: [String: String] = testEnvironment()) throws -> RunnerServer {
        try RunnerServeTests.server("cold", environment: environment)
    }

    var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// How many `push/register` requests the runner has answered, from its request log. Every answered request is
    /// logged before its answer is written, so once the client has its answers they are all in the pipe.
    func registrations(atLeast expected: Int = 0) -> Int {
        func count() -> Int { stderr.components(separatedBy: "\"http.path\":\"/api/push/register\"").count - 1 }
        for _ in 0..<100 where count() < expected { Thread.sleep(forTimeInterval: 0.02) }
        Thread.sleep(forTimeInterval: 0.1)
        return count()
    }

    /// The messages the emulated FCM accepted for `token`, waiting up to 5 s for at least `atLeast` of them.
    func fcmMessages(to token: String, atLeast: Int = 0) throws -> [JSONValue] {
        var found: [JSONValue] = []
        for attempt in 0..<100 {
            found =
                try request("GET", "/_emulator/fcm/messages").json?["messages"]?.arrayValue?
                .filter { $0["token"]?.stringValue == token } ?? []
            if found.count >= atLeast || attempt == 99 { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return found
    }
}

/// The `userInfo` iOS hands the app for an FCM message with a notification: FCM's `data` keys at the top level,
/// `aps` from `apns.payload.aps` plus the `alert` made from `notification`, and FCM's own `gcm.message_id`.
func iOSUserInfo(fromFCM message: JSONValue, messageName: String?) -> [AnyHashable: Any] {
    var userInfo: [AnyHashable: Any] = [:]
    for (key, value) in message["data"]?.objectValue ?? [:] { userInfo[key] = foundationValue(value) }
    var aps = (foundationValue(message["apns"]?["payload"]?["aps"] ?? .object([:])) as? [String: Any]) ?? [:]
    if let notification = message["notification"] { aps["alert"] = foundationValue(notification) }
    userInfo["aps"] = aps
    userInfo["gcm.message_id"] = messageName.map { String($0.split(separator: "/").last ?? "") } ?? "0:0"
    userInfo["google.c.a.e"] = "1"
    return userInfo
}

/// A JSON value as `JSONSerialization` would give it.
func foundationValue(_ value: JSONValue) -> Any {
    switch value {
    case .string(let text): return text
    case .number(let number): return number
    case .bool(let flag): return flag
    case .null: return NSNull()
    case .array(let items): return items.map(foundationValue)
    case .object(let fields): return fields.mapValues(foundationValue)
    }
}

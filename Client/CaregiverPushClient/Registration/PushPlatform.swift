import Foundation

// What the app implements around the library: the pieces that only exist on the phone. Each is small enough that
// docs/app-integration.md shows the whole conformance.

/// Asks the caregiver to allow notifications, and reads whether they still are: `UNUserNotificationCenter`.
@MainActor
public protocol NotificationPermission {
    /// `requestAuthorization(options: [.alert, .sound])`.
    /// - Returns: whether notifications are allowed. iOS asks only the first time; later calls answer at once.
    func requestAuthorization() async throws -> Bool

    /// `notificationSettings().authorizationStatus`, without asking: read on launch and on every return to the
    /// foreground, since the caregiver may have turned notifications off in the Settings app meanwhile.
    func authorizationStatus() async -> CaregiverPushPermissionStatus
}

/// The parts of `UNAuthorizationStatus` the kit acts on.
public enum CaregiverPushPermissionStatus: Sendable, Hashable {
    /// `.authorized`, `.provisional` or `.ephemeral`.
    case allowed
    /// `.denied`: turned off in the Settings app, or never allowed.
    case denied
    /// `.notDetermined`: never asked (or asked again after a reinstall).
    case notDetermined
}

/// Which side of the app is signed in, and as whom. Only caregiver mode registers; patient mode has no push settings,
/// and a kit nobody told about the session is signed out.
public enum CaregiverPushAppMode: Sendable, Hashable {
    /// A caregiver, by their account id (the Supabase user id): the kit's stored push state belongs to them.
    case caregiver(UUID)
    case patient
    case signedOut

    /// Whether push applies at all: caregiver mode.
    public var isCaregiver: Bool {
        if case .caregiver = self { true } else { false }
    }
}

/// The phone's current FCM registration token: `Messaging.messaging().token()`.
@MainActor
public protocol PushTokenSource {
    func currentToken() async throws -> String
}

/// Small persisted values, read and written on the main actor: `UserDefaults`, or the Keychain for what must survive
/// a reinstall (see ``PushTokenLifecycle``'s `installationStore`).
@MainActor
public protocol PushStateStore {
    func string(forKey key: String) -> String?
    /// Stores `value`, or removes the key when it is `nil`.
    func set(_ value: String?, forKey key: String)
}

/// The current time, so that the daily re-registration can be tested without waiting a day.
public protocol PushClock: Sendable {
    func now() -> Date
}

/// The system clock.
public struct SystemPushClock: PushClock {
    public init() {}
    public func now() -> Date { Date() }
}

/// A ``PushStateStore`` over `UserDefaults`: what the app uses for everything but the installation id.
public struct UserDefaultsPushStateStore: PushStateStore {
    private let defaults: UserDefaults

    public init(defaults: UserDefaults) {
        self.defaults = defaults
    }

    public func string(forKey key: String) -> String? {
        defaults.string(forKey: key)
    }

    public func set(_ value: String?, forKey key: String) {
        if let value { defaults.set(value, forKey: key) } else { defaults.removeObject(forKey: key) }
    }
}

import Observation

/// The caregiver's "見守りPush通知" toggle (seeds' T007/T029), for a SwiftUI settings screen.
///
/// - ON: ``isUpdating`` → notification permission → FCM token → `push/register` → ``isPushEnabled`` (persisted).
/// - OFF: ``isUpdating`` → `push/unregister` → off (persisted).
/// - Permission denied: stays off, ``errorMessage`` says how to allow it, nothing is stored or sent.
/// - A network or server error: stays as it was, with ``errorMessage``.
///
/// While ``isUpdating`` the screen shows its blocking overlay; a toggle during an update is ignored.
@MainActor
@Observable
public final class CaregiverPushSettingsModel {
    /// The sentences this model shows (the app is Japanese); API failures use ``PushAPIError/userMessage``.
    public enum Message {
        public static let permissionDenied = "通知が許可されていません。設定アプリで通知を許可してから、もう一度オンにしてください。"
        public static let tokenUnavailable = "通知の準備ができませんでした。時間をおいてもう一度お試しください。"
    }

    /// Whether this phone gets pushes; off until the caregiver turns it on, restored from the store at launch.
    public private(set) var isPushEnabled: Bool
    public private(set) var isUpdating = false
    /// The last failure, for an alert; cleared when the next change starts.
    public var errorMessage: String?

    private let lifecycle: PushTokenLifecycle
    private let permission: any NotificationPermission

    public init(lifecycle: PushTokenLifecycle, permission: any NotificationPermission) {
        self.lifecycle = lifecycle
        self.permission = permission
        self.isPushEnabled = lifecycle.isPushEnabled
    }

    /// The toggle's action. Returns when the change has succeeded or failed.
    public func setPushEnabled(_ enabled: Bool) async {
        guard !isUpdating, enabled != isPushEnabled else { return }
        isUpdating = true
        errorMessage = nil
        defer { isUpdating = false }
        enabled ? await turnOn() : await turnOff()
    }

    private func turnOn() async {
        guard (try? await permission.requestAuthorization()) == true else {
            errorMessage = Message.permissionDenied
            return
        }
        guard let token = try? await lifecycle.tokenSource.currentToken() else {
            errorMessage = Message.tokenUnavailable
            return
        }
        do {
            try await lifecycle.turnOn(token: token)
            isPushEnabled = true
        } catch {
            errorMessage = error.userMessage
        }
    }

    private func turnOff() async {
        do {
            try await lifecycle.turnOff()
            isPushEnabled = false
        } catch {
            errorMessage = error.userMessage
        }
    }
}

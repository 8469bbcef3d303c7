import Observation

/// The app's pending navigation from a tapped notification (seeds' T030/T031).
///
/// The `UNUserNotificationCenterDelegate` hands every tap to ``route(userInfo:identifier:)``; the caregiver's home
/// screen observes ``target``, switches to History at that date and slot, and calls ``clear()``. A target set before
/// any view exists (a cold start from a tap) waits here until one reads it.
@MainActor
@Observable
public final class NotificationDeepLinkRouter {
    /// The screen to open, or `nil` when there is nothing to do.
    public private(set) var target: NotificationDeepLinkTarget?

    public init() {}

    /// Routes a remote `DOSE_TAKEN` push; anything else leaves ``target`` as it was.
    public func routeFromRemotePush(userInfo: [AnyHashable: Any]) {
        if let target = PushDeepLink.target(remotePush: userInfo) { self.target = target }
    }

    /// Routes a local reminder by its identifier (`notif:2026-02-11:morning:1`).
    public func route(identifier: String) {
        if let target = PushDeepLink.target(localIdentifier: identifier) { self.target = target }
    }

    /// Routes a tapped notification of either kind; see ``PushDeepLink/target(userInfo:identifier:)``.
    public func route(userInfo: [AnyHashable: Any], identifier: String) {
        if let target = PushDeepLink.target(userInfo: userInfo, identifier: identifier) { self.target = target }
    }

    /// Called once the History screen has opened the target.
    public func clear() {
        target = nil
    }
}

import Foundation
import Observation

/// How iOS should present a notification that arrives while the app is in the foreground: the options the app's
/// `userNotificationCenter(_:willPresent:)` returns, as `UNNotificationPresentationOptions` names them.
public struct CaregiverPushSystemPresentation: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    public static let banner = Self(rawValue: 1 << 0)
    public static let list = Self(rawValue: 1 << 1)
    public static let sound = Self(rawValue: 1 << 2)

    /// What iOS does for an app that does not decide: banner, Notification Center, sound.
    public static let system: Self = [.banner, .list, .sound]
}

/// The in-app banner for a `DOSE_TAKEN` push that arrived in the foreground, with its VoiceOver text.
public struct CaregiverPushBanner: Identifiable, Sendable, Hashable {
    public let id: UUID
    /// The push's own title and body (the server's text, `aps.alert`); the catalog's title when it had none.
    public let title: String
    public let body: String
    public let target: CaregiverPushDeepLinkTarget
    public let accessibilityLabel: String
    public let accessibilityHint: String
}

/// What a notification arriving in the foreground is, read from its `userInfo` where the delegate gets it — off
/// the main actor. `userInfo` is not `Sendable` and does not cross to the main actor; this does, and
/// ``CaregiverPushForegroundPresenter/present(_:mode:)`` applies it there.
///
/// ```swift
/// nonisolated func userNotificationCenter(_ center: UNUserNotificationCenter, willPresent notification: UNNotification)
///     async -> UNNotificationPresentationOptions
/// {
///     let decision = CaregiverPushForegroundDecision(userInfo: notification.request.content.userInfo)
///     let shown = await MainActor.run { presenter.present(decision, mode: lifecycle.mode) }
///     …
/// }
/// ```
public struct CaregiverPushForegroundDecision: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        /// A `DOSE_TAKEN` push that routes, with its own alert title and body when it had them.
        case doseTaken(CaregiverPushDeepLinkTarget, title: String?, body: String?)
        /// A remote push of another type, or one that does not route.
        case otherPush
        /// One of the app's local reminders (no `type`).
        case localReminder
    }

    public let kind: Kind

    public init(userInfo: [AnyHashable: Any]) {
        guard CaregiverPushDeepLink.isRemotePush(userInfo) else {
            kind = .localReminder
            return
        }
        guard let target = CaregiverPushDeepLink.target(remotePush: userInfo) else {
            kind = .otherPush
            return
        }
        let alert = (userInfo[AnyHashable("aps")] as? [String: Any])?["alert"] as? [String: Any]
        kind = .doseTaken(target, title: alert?["title"] as? String, body: alert?["body"] as? String)
    }

    /// What iOS should present in `mode`; the in-app banner is the presenter's.
    public func systemPresentation(mode: CaregiverPushAppMode) -> CaregiverPushSystemPresentation {
        switch kind {
        case .localReminder: .system
        case _ where !mode.isCaregiver: []
        case .otherPush: .system
        case .doseTaken: [.list, .sound]
        }
    }
}

/// Decides what a push arriving in the foreground shows (the app delegate's `willPresent`), and routes a tap on
/// the in-app banner exactly as a tap on a system notification. Replaces the `willPresent` half of the app's
/// `NotificationCoordinator` and its `bannerPresenter.handleRemotePush`.
///
/// The decision (``CaregiverPushForegroundDecision``, made off the main actor; ``present(_:mode:)`` applies it):
/// - a routable `DOSE_TAKEN` push in caregiver mode → the app's in-app banner (``banner``) instead of the system
///   banner; iOS still files it in Notification Center and plays its sound (`[.list, .sound]`), so it is not lost
///   when the caregiver ignores the banner;
/// - a push of another type, or one that does not route → iOS presents it as usual (`[.banner, .list, .sound]`);
/// - any push outside caregiver mode (a stale registration reaching a phone now in patient mode) → nothing;
/// - a local reminder (no `type`) → iOS presents it as usual; the app's reminder banner is its own.
@MainActor
@Observable
public final class CaregiverPushForegroundPresenter {
    /// The banner on screen, or `nil`. A newer push replaces it.
    public private(set) var banner: CaregiverPushBanner?

    private let router: CaregiverPushDeepLinkRouter
    private let strings: CaregiverPushStrings

    public init(router: CaregiverPushDeepLinkRouter, strings: CaregiverPushStrings = .preferred()) {
        self.router = router
        self.strings = strings
    }

    /// For `userNotificationCenter(_:willPresent:)`, on the main actor: sets ``banner`` when the app shows its own,
    /// and returns what iOS should present.
    public func present(_ decision: CaregiverPushForegroundDecision, mode: CaregiverPushAppMode)
        -> CaregiverPushSystemPresentation
    {
        let presentation = decision.systemPresentation(mode: mode)
        if mode.isCaregiver, case .doseTaken(let target, let pushTitle, let pushBody) = decision.kind {
            let title = pushTitle ?? strings(.pushTitle)
            let body = pushBody ?? ""
            banner = CaregiverPushBanner(
                id: UUID(), title: title, body: body, target: target,
                accessibilityLabel: strings(.bannerLabel, title, body), accessibilityHint: strings(.bannerHint))
        }
        return presentation
    }

    /// A tap on the banner: routes its target through the router, as a tap on the system notification would, and
    /// dismisses it.
    /// - Returns: whether there was a banner to route.
    @discardableResult
    public func tapBanner() -> Bool {
        guard let banner else { return false }
        self.banner = nil
        return router.route(banner.target)
    }

    /// The banner timed out or was swiped away.
    public func dismissBanner() {
        banner = nil
    }
}

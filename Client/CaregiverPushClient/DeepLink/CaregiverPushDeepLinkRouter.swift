import Foundation
import Observation

/// The app's pending navigation from a tapped notification or in-app banner. Replaces the push
/// half of the app's Combine-based `NotificationDeepLinkRouter`.
///
/// Every tap goes to ``route(_:)``: a cold start (the tap arrives before any view exists), a tap while the app is in
/// the background, and a tap on the in-app banner in the foreground (``CaregiverPushForegroundPresenter``) all land
/// here, and the target waits in ``pending`` until the caregiver's home screen takes it with
/// ``takeNavigation(selectedPatientID:linkedPatientIDs:)`` — on a cold start, until the caregiver's patients are
/// loaded.
@MainActor
@Observable
public final class CaregiverPushDeepLinkRouter {
    /// The target not yet opened, or `nil` when there is nothing to do. A newer tap replaces an older one.
    public private(set) var pending: CaregiverPushDeepLinkTarget?

    /// The last target dropped without opening anything, and why; cleared by the next tap. For the app's log, or a
    /// word to the caregiver.
    public private(set) var dropped: CaregiverPushDroppedTarget?

    public init() {}

    /// Routes a tapped notification of either kind; see ``CaregiverPushDeepLink/target(userInfo:identifier:)``.
    /// Something unroutable leaves ``pending`` as it was. For code already on the main actor; a notification
    /// delegate reads the target off the main actor instead (``CaregiverPushDeepLink/target(userInfo:identifier:)``
    /// is nonisolated and its result `Sendable`) and hands it to ``route(_:)``.
    /// - Returns: whether it routed.
    @discardableResult
    public func route(userInfo: [AnyHashable: Any], identifier: String) -> Bool {
        route(CaregiverPushDeepLink.target(userInfo: userInfo, identifier: identifier))
    }

    /// Routes a remote `DOSE_TAKEN` push only (the app's name for it); anything else leaves ``pending`` as it was.
    @discardableResult
    public func routeFromRemotePush(userInfo: [AnyHashable: Any]) -> Bool {
        route(CaregiverPushDeepLink.target(remotePush: userInfo))
    }

    /// Routes a target already read: by the notification delegate off the main actor, or the in-app banner's.
    /// `nil` leaves ``pending`` as it was.
    /// - Returns: whether it routed.
    @discardableResult
    public func route(_ target: CaregiverPushDeepLinkTarget?) -> Bool {
        guard let target else { return false }
        pending = target
        dropped = nil
        return true
    }

    /// Takes the pending target as the steps to perform, and clears it — once the caregiver's patients are known.
    ///
    /// Call it when ``pending`` changes and again when the linked patients have loaded: on a cold start from a push
    /// the tap arrives before them, and the target waits (`linkedPatientIDs` `nil`) instead of going nowhere.
    ///
    /// - Parameters:
    ///   - selectedPatientID: the patient the caregiver's screens show now (`nil` before one is chosen).
    ///   - linkedPatientIDs: the caregiver's patients, or `nil` while they are not loaded yet. A target naming a
    ///     patient not among them (the link was revoked since the push) is dropped, and ``dropped`` says so: the
    ///     app opens nothing rather than another patient's History.
    /// - Returns: `nil` when nothing is pending, the patients are not known yet, or the target was dropped.
    public func takeNavigation(selectedPatientID: String?, linkedPatientIDs: Set<String>?) -> CaregiverPushNavigation? {
        guard let target = pending, let linkedPatientIDs else { return nil }
        pending = nil
        if let patient = target.patientID {
            guard linkedPatientIDs.contains(patient) else {
                dropped = CaregiverPushDroppedTarget(target: target, reason: .patientNotLinked)
                return nil
            }
            return CaregiverPushNavigation(
                selectPatient: patient == selectedPatientID ? nil : patient, dateKey: target.dateKey,
                slot: target.slot)
        }
        return CaregiverPushNavigation(selectPatient: nil, dateKey: target.dateKey, slot: target.slot)
    }

    /// Drops the pending target (sign-out, a switch to patient mode).
    public func clear() {
        pending = nil
    }
}

/// A tapped target that opened nothing, and why.
public struct CaregiverPushDroppedTarget: Hashable, Sendable {
    public enum Reason: Hashable, Sendable {
        /// The target's patient is not among the caregiver's linked patients (the link was revoked since the push,
        /// or the push was meant for another account on this phone).
        case patientNotLinked
    }

    public let target: CaregiverPushDeepLinkTarget
    public let reason: Reason
}

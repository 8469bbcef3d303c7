import Foundation
import Observation

/// The app's pending navigation from a tapped notification or in-app banner. Replaces the push
/// half of the app's Combine-based `NotificationDeepLinkRouter`.
///
/// Every tap goes to ``route(userInfo:identifier:)``: a cold start (the tap arrives before any view exists), a tap
/// while the app is in the background, and a tap on the in-app banner in the foreground
/// (``CaregiverPushForegroundPresenter``) all land here, and the target waits in ``pending`` until the caregiver's
/// home screen takes it with ``takeNavigation(selectedPatientID:linkedPatientIDs:)``.
@MainActor
@Observable
public final class CaregiverPushDeepLinkRouter {
    /// The target not yet opened, or `nil` when there is nothing to do. A newer tap replaces an older one.
    public private(set) var pending: CaregiverPushDeepLinkTarget?

    public init() {}

    /// Routes a tapped notification of either kind; see ``CaregiverPushDeepLink/target(userInfo:identifier:)``.
    /// Something unroutable leaves ``pending`` as it was.
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

    /// Routes a target already read (the in-app banner's).
    @discardableResult
    public func route(_ target: CaregiverPushDeepLinkTarget?) -> Bool {
        guard let target else { return false }
        pending = target
        return true
    }

    /// Takes the pending target as the steps to perform, and clears it.
    ///
    /// - Parameters:
    ///   - selectedPatientID: the patient the caregiver's screens show now (`nil` before one is chosen).
    ///   - linkedPatientIDs: the caregiver's patients. A target naming another patient (the link was revoked since
    ///     the push) is dropped: the app opens nothing rather than another patient's History.
    /// - Returns: `nil` when nothing is pending or the target's patient is not linked.
    public func takeNavigation(selectedPatientID: UUID?, linkedPatientIDs: Set<UUID>) -> CaregiverPushNavigation? {
        guard let target = pending else { return nil }
        pending = nil
        if let patient = target.patientID {
            guard linkedPatientIDs.contains(patient) else { return nil }
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

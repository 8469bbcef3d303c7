import Foundation
import Observation

/// Why push is OFF although the caregiver did not turn it off; the settings screen shows its sentence.
public enum CaregiverPushOffReason: String, Sendable, Hashable, CaseIterable {
    /// Notifications were turned off in the Settings app (found on launch or on return to the foreground).
    case permissionRevoked
    /// The server disabled this phone: FCM rejected its token (`UNREGISTERED`, `INVALID_ARGUMENT`,
    /// `SENDER_ID_MISMATCH`), it was not seen for months (`STALE`), or another token of this install replaced it.
    case serverDisabled
    /// Another account registered this phone since (`TOKEN_REASSIGNED`).
    case otherAccount

    public var messageKey: CaregiverPushStringKey {
        switch self {
        case .permissionRevoked: .offPermissionRevoked
        case .serverDisabled: .offServerDisabled
        case .otherAccount: .offOtherAccount
        }
    }

    init(serverReason: String?) {
        self = serverReason == "TOKEN_REASSIGNED" ? .otherAccount : .serverDisabled
    }
}

/// What a re-check on launch or on return to the foreground did (for the app's logs and the tests).
public enum CaregiverPushRecheckOutcome: Sendable, Hashable {
    /// Push is off, or the app is not in caregiver mode: nothing to check.
    case notApplicable
    /// Everything as it was.
    case unchanged
    /// The token had changed, was a day old (``PushTokenLifecycle/refreshInterval``), its language changed or its last registration failed: registered again.
    case reregistered
    /// Push went OFF, for this reason.
    case turnedOff(CaregiverPushOffReason)
    /// The server could not be asked; push stays as it was, and the next re-check tries again.
    case failed(CaregiverPushErrorState)
}

/// What sign-out did about this phone's registration.
public enum CaregiverPushSignOutOutcome: Sendable, Hashable {
    /// Push was off: nothing to tell the server.
    case nothingRegistered
    /// The server disabled this phone before the session ended.
    case unregistered
    /// The server could not be told (offline, timeout…); local state is forgotten anyway. The screen says so
    /// (``CaregiverPushStringKey/signOutUnregisterFailed``): the phone may get pushes until another account
    /// registers it or the server finds it stale.
    case forgottenLocally(CaregiverPushErrorState)
}

/// The caregiver's "見守りPush通知" toggle, for a SwiftUI settings screen. Replaces the app's
/// `CaregiverPushSettingsViewModel`.
///
/// - ON: ``isUpdating`` → notification permission → FCM token → `push/register` → ``isPushEnabled`` (persisted); from
///   the permission's answer on, within ``budget`` (the token fetch included).
/// - OFF: ``isUpdating`` → `push/unregister` → off (persisted).
/// - Permission denied: stays off, ``errorState`` is ``CaregiverPushErrorState/permissionDenied``, nothing is sent.
/// - A network or server error: stays as it was, with ``errorState`` saying what the screen offers.
/// - Patient mode, or no session the app has told the kit of (``PushTokenLifecycle/mode``): ``isAvailable`` is false
///   and nothing registers.
///
/// While ``isUpdating`` the screen shows its blocking overlay; it is true from the tap until the change has
/// succeeded or failed, and a toggle during an update is ignored.
@MainActor
@Observable
public final class CaregiverPushSettingsModel {
    /// Whether this phone gets pushes; off until the caregiver turns it on, restored from the store at launch
    /// (``PushTokenLifecycle/isPushEnabled``: off for a caregiver the stored state does not belong to).
    public var isPushEnabled: Bool { lifecycle.isPushEnabled }
    public private(set) var isUpdating = false
    /// The last failure; cleared when the next change starts.
    public var errorState: CaregiverPushErrorState?
    /// Why push is OFF without the caregiver turning it off; cleared when they turn it on.
    public var offReason: CaregiverPushOffReason? { lifecycle.offReason }

    public let lifecycle: PushTokenLifecycle
    /// How long turning push on may take once notifications are allowed: the FCM token fetch and the registration
    /// together, within ``CaregiverPushRequestBudget/total``.
    public let budget: CaregiverPushRequestBudget
    private let permission: any NotificationPermission
    /// Whether the FCM token of the change in flight has arrived (which failure a deadline is).
    @ObservationIgnored private var tokenArrived = false

    /// - Parameter budget: ``CaregiverPushRequestBudget/standard`` (5 s) by default; the overlay is up for at most
    ///   that long after the permission prompt (whose answer is the caregiver's time, not the kit's).
    public init(
        lifecycle: PushTokenLifecycle, permission: any NotificationPermission,
        budget: CaregiverPushRequestBudget = .standard
    ) {
        self.lifecycle = lifecycle
        self.permission = permission
        self.budget = budget
    }

    /// Whether the screen shows the push section at all: caregiver mode only. Observable: it follows
    /// ``PushTokenLifecycle/setMode(_:)``.
    public var isAvailable: Bool { lifecycle.mode.isCaregiver }

    /// The toggle's action. Returns when the change has succeeded or failed.
    public func setPushEnabled(_ enabled: Bool) async {
        guard isAvailable, !isUpdating, enabled != isPushEnabled else { return }
        isUpdating = true
        errorState = nil
        defer { isUpdating = false }
        enabled ? await turnOn() : await turnOff()
    }

    /// The ``CaregiverPushErrorState/Action/retry`` button: the change that failed, again.
    public func retry(enabling enabled: Bool) async {
        await setPushEnabled(enabled)
    }

    private func turnOn() async {
        guard (try? await permission.requestAuthorization()) == true else {
            errorState = .permissionDenied
            return
        }
        // Firebase's token fetch does not promise to answer, nor to stop when cancelled: the deadline stops waiting
        // for it, and a token that arrives after the deadline registers nothing.
        tokenArrived = false
        let lifecycle = lifecycle
        let outcome = await CaregiverPushDeadline.run(seconds: budget.total) {
            [weak self] () -> CaregiverPushErrorState? in
            guard let registration = try? await lifecycle.currentRegistration() else { return .tokenUnavailable }
            self?.tokenArrived = true
            guard !Task.isCancelled else { return .retry }
            do throws(PushAPIError) {
                try await lifecycle.turnOn(registration)
                return nil
            } catch {
                return error.errorState
            }
        }
        switch outcome {
        case .finished(let failure): errorState = failure
        case .timedOut: errorState = tokenArrived ? .retry : .tokenUnavailable
        }
    }

    private func turnOff() async {
        do {
            try await lifecycle.turnOff()
        } catch {
            errorState = error.errorState
        }
    }

    /// Call on launch and whenever the app returns to the foreground (`scenePhase == .active`). While push is on
    /// in caregiver mode, in this order:
    /// 1. notification permission: revoked in the Settings app → OFF (``CaregiverPushOffReason/permissionRevoked``),
    ///    and the server is told (again at the next re-check if it could not be reached);
    /// 2. the FCM token: changed, a day old, in another language, or its last registration failed → registered again;
    /// 3. the server's record of the token: disabled (FCM said `UNREGISTERED`…) → OFF with the reason.
    @discardableResult
    public func recheck() async -> CaregiverPushRecheckOutcome {
        guard isAvailable, !isUpdating else { return .notApplicable }
        await lifecycle.flushPendingUnregister()
        guard lifecycle.isPushEnabled else { return .notApplicable }
        if await permission.authorizationStatus() != .allowed {
            _ = await lifecycle.turnOffLocally(keepPending: true)
            lifecycle.setOffReason(.permissionRevoked)
            return .turnedOff(.permissionRevoked)
        }
        guard let registration = try? await lifecycle.currentRegistration() else { return .unchanged }
        if lifecycle.isRegistrationDue(registration) {
            do {
                return try await lifecycle.registerIfNeeded(registration) ? .reregistered : .unchanged
            } catch {
                return .failed(error.errorState)
            }
        }
        let record: (registration: PushRegistrationID, status: CaregiverPushDeviceStatus?)?
        do {
            record = try await lifecycle.registeredDeviceStatus()
        } catch {
            return .failed(error.errorState)
        }
        guard let record else { return .unchanged }
        guard let status = record.status else {
            // The server has no row for it (a restored database, a deleted account): register it again.
            do {
                try await lifecycle.turnOn(registration)
                return .reregistered
            } catch {
                return .failed(error.errorState)
            }
        }
        guard !status.enabled else { return .unchanged }
        let reason = CaregiverPushOffReason(serverReason: status.disabledReason)
        lifecycle.serverDisabled(reason)
        return .turnedOff(reason)
    }

    /// Call before the session ends (the bearer token must still work): unregisters this phone, then forgets the
    /// local push state and whose it was even when the server could not be reached, and says which happened. The
    /// installation id is kept. Shows the overlay meanwhile. Afterwards the kit is signed out
    /// (``PushTokenLifecycle/mode``) until the app sets the next session's mode.
    public func signOut() async -> CaregiverPushSignOutOutcome {
        isUpdating = true
        defer { isUpdating = false }
        let wasRegistered = lifecycle.isPushEnabled
        let failure = await lifecycle.turnOffLocally(keepPending: false)
        lifecycle.signedOut()
        errorState = nil
        guard wasRegistered else { return .nothingRegistered }
        return failure.map { .forgottenLocally($0.errorState) } ?? .unregistered
    }
}

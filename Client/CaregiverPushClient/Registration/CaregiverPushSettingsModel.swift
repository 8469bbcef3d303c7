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
    /// The token had changed, was 30 days old or its last registration failed: registered again.
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
/// - ON: ``isUpdating`` → notification permission → FCM token → `push/register` → ``isPushEnabled`` (persisted).
/// - OFF: ``isUpdating`` → `push/unregister` → off (persisted).
/// - Permission denied: stays off, ``errorState`` is ``CaregiverPushErrorState/permissionDenied``, nothing is sent.
/// - A network or server error: stays as it was, with ``errorState`` saying what the screen offers.
/// - Patient mode (``PushTokenLifecycle/mode``): ``isAvailable`` is false and nothing registers.
///
/// While ``isUpdating`` the screen shows its blocking overlay; it is true from the tap until the change has
/// succeeded or failed, and a toggle during an update is ignored.
@MainActor
@Observable
public final class CaregiverPushSettingsModel {
    /// Whether this phone gets pushes; off until the caregiver turns it on, restored from the store at launch.
    public private(set) var isPushEnabled: Bool
    public private(set) var isUpdating = false
    /// The last failure; cleared when the next change starts.
    public var errorState: CaregiverPushErrorState?
    /// Why push is OFF without the caregiver turning it off; cleared when they turn it on.
    public private(set) var offReason: CaregiverPushOffReason?

    public let lifecycle: PushTokenLifecycle
    private let permission: any NotificationPermission

    public init(lifecycle: PushTokenLifecycle, permission: any NotificationPermission) {
        self.lifecycle = lifecycle
        self.permission = permission
        self.isPushEnabled = lifecycle.isPushEnabled
        self.offReason = lifecycle.offReason
    }

    /// Whether the screen shows the push section at all: caregiver mode only (patient mode never registers).
    public var isAvailable: Bool { lifecycle.mode == .caregiver }

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
        guard let token = try? await lifecycle.tokenSource.currentToken() else {
            errorState = .tokenUnavailable
            return
        }
        do {
            try await lifecycle.turnOn(token: token)
            isPushEnabled = lifecycle.isPushEnabled
            offReason = nil
        } catch {
            errorState = error.errorState
        }
    }

    private func turnOff() async {
        do {
            try await lifecycle.turnOff()
            isPushEnabled = false
            offReason = nil
        } catch {
            errorState = error.errorState
        }
    }

    /// Call on launch and whenever the app returns to the foreground (`scenePhase == .active`). While push is on
    /// in caregiver mode, in this order:
    /// 1. notification permission: revoked in the Settings app → OFF (``CaregiverPushOffReason/permissionRevoked``),
    ///    and the server is told (again at the next re-check if it could not be reached);
    /// 2. the FCM token: changed, 30 days old, or its last registration failed → registered again;
    /// 3. the server's record of the token: disabled (FCM said `UNREGISTERED`…) → OFF with the reason.
    @discardableResult
    public func recheck() async -> CaregiverPushRecheckOutcome {
        guard isAvailable, !isUpdating else { return .notApplicable }
        await lifecycle.flushPendingUnregister()
        guard lifecycle.isPushEnabled else {
            isPushEnabled = false
            return .notApplicable
        }
        if await permission.authorizationStatus() != .allowed {
            _ = await lifecycle.turnOffLocally(keepPending: true)
            lifecycle.setOffReason(.permissionRevoked)
            return settle(.turnedOff(.permissionRevoked))
        }
        guard let token = try? await lifecycle.tokenSource.currentToken() else { return .unchanged }
        if lifecycle.isRegistrationDue(token) {
            do {
                return try await lifecycle.registerIfNeeded(token: token) ? .reregistered : .unchanged
            } catch {
                return .failed(error.errorState)
            }
        }
        let record: (token: String, status: CaregiverPushDeviceStatus?)?
        do {
            record = try await lifecycle.registeredDeviceStatus()
        } catch {
            return .failed(error.errorState)
        }
        guard let record else { return .unchanged }
        guard let status = record.status else {
            // The server has no row for it (a restored database, a deleted account): register it again.
            do {
                try await lifecycle.turnOn(token: token)
                return .reregistered
            } catch {
                return .failed(error.errorState)
            }
        }
        guard !status.enabled else { return .unchanged }
        let reason = CaregiverPushOffReason(serverReason: status.disabledReason)
        lifecycle.serverDisabled(reason)
        return settle(.turnedOff(reason))
    }

    private func settle(_ outcome: CaregiverPushRecheckOutcome) -> CaregiverPushRecheckOutcome {
        isPushEnabled = lifecycle.isPushEnabled
        offReason = lifecycle.offReason
        return outcome
    }

    /// Call before the session ends (the bearer token must still work): unregisters this phone, then forgets the
    /// local push state even when the server could not be reached, and says which happened. The installation id is
    /// kept. Shows the overlay meanwhile.
    public func signOut() async -> CaregiverPushSignOutOutcome {
        isUpdating = true
        defer { isUpdating = false }
        let wasRegistered = lifecycle.isPushEnabled
        let failure = await lifecycle.turnOffLocally(keepPending: false)
        lifecycle.setOffReason(nil)
        isPushEnabled = false
        offReason = nil
        errorState = nil
        guard wasRegistered else { return .nothingRegistered }
        return failure.map { .forgottenLocally($0.errorState) } ?? .unregistered
    }
}

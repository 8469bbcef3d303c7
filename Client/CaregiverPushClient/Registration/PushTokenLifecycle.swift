import Foundation
import Observation

/// Keeps the server's record of this phone's FCM token current (docs/app-integration.md, the token lifecycle's gates).
///
/// On launch and on every token refresh callback, while the caregiver has push turned on, it registers when
/// - the token differs from the last one registered (or the environment or the ``language`` does), or
/// - the last successful registration is older than ``refreshInterval`` (a day: the server sends nothing to a
///   registration not renewed for `PUSH_DEVICE_STALE_DAYS`, 30 by default, so that a phone whose session ended
///   without a sign-out stops receiving; docs/behaviour.md#registration-bound), or
/// - the last attempt failed (so a failed write is retried on the next launch).
///
/// Otherwise it sends nothing, so repeated launches do not add registrations. Registrations and unregistrations run
/// one at a time: a second trigger waits for the one in flight, then decides afresh, so the same token is never
/// registered twice at once and a newer token always lands after an older one.
///
/// Each registration carries ``installationId``, created once and kept in `installationStore`. The server disables
/// this caregiver's other devices with the same installation id as `REPLACED` — the "latest token replaces the old
/// one" gate. For that to hold across a delete-and-reinstall, the app backs `installationStore` with the Keychain,
/// which iOS keeps when an app is deleted; `UserDefaults` is erased with the app.
///
/// It fails closed: nothing registers until the app says a caregiver is signed in (``setMode(_:)``), and the stored
/// push state belongs to that caregiver — another caregiver signing in on the phone starts from off, even when the
/// previous session ended without ``CaregiverPushSettingsModel/signOut()``. ``mode``, ``isPushEnabled`` and
/// ``offReason`` are observable, so SwiftUI redraws when any of them changes.
@MainActor
@Observable
public final class PushTokenLifecycle {
    /// A registration older than this is renewed on the next launch or token callback.
    public static let refreshInterval: TimeInterval = 24 * 60 * 60

    /// The keys this type writes; all under `caregiverPush.`.
    public enum StateKey {
        public static let isPushEnabled = "caregiverPush.isPushEnabled"
        public static let installationId = "caregiverPush.installationId"
        /// The registered identity's text: a token, or a FID when ``registeredTarget`` says `fid`.
        public static let registeredToken = "caregiverPush.registeredToken"
        /// `fid` when the registered identity is a Firebase Installation ID; absent for a token.
        public static let registeredTarget = "caregiverPush.registeredTarget"
        public static let registeredEnvironment = "caregiverPush.registeredEnvironment"
        /// The language the phone was registered with.
        public static let registeredLanguage = "caregiverPush.registeredLanguage"
        public static let lastSuccessAt = "caregiverPush.lastSuccessAt"
        public static let lastAttemptFailed = "caregiverPush.lastAttemptFailed"
        /// A token whose unregistration failed when permission was revoked; sent again at the next re-check.
        public static let pendingUnregisterToken = "caregiverPush.pendingUnregisterToken"
        /// `fid` when the pending unregistration is of a FID.
        public static let pendingUnregisterTarget = "caregiverPush.pendingUnregisterTarget"
        /// Why push went OFF without the caregiver turning it off (``CaregiverPushOffReason``'s raw value).
        public static let offReason = "caregiverPush.offReason"
        /// The caregiver the other keys belong to (their account id, lowercased).
        public static let caregiverID = "caregiverPush.caregiverID"
    }

    /// Which side of the app is signed in; ``setMode(_:)`` changes it. `.signedOut` until the app says otherwise:
    /// outside caregiver mode nothing registers (launch, token callbacks and the toggle all do nothing).
    public private(set) var mode: CaregiverPushAppMode = .signedOut

    /// Whether the caregiver turned push on (and the server accepted this phone); off until then.
    public private(set) var isPushEnabled = false

    /// Why push went OFF on its own, until the caregiver turns it on again.
    public private(set) var offReason: CaregiverPushOffReason?

    public let environment: PushEnvironment
    /// The language this phone's pushes are worded in: the kit's own (``CaregiverPushStrings/preferred(appLocalizations:developmentLocalization:preferredLanguages:)``),
    /// so that a push and the app's screens speak one language.
    public let language: String
    let source: any PushRegistrationSource
    private let api: any PushAPI
    private let store: any PushStateStore
    private let installationStore: any PushStateStore
    private let clock: any PushClock
    @ObservationIgnored private var busy = false
    @ObservationIgnored private var waiting: [CheckedContinuation<Void, Never>] = []

    /// - Parameters:
    ///   - api: ``PushAPIClient``, or an app's own stand-in in its tests.
    ///   - environment: `.dev` in debug builds, `.prod` in release builds; the app decides.
    ///   - store: the toggle and registration state (`UserDefaults`).
    ///   - installationStore: where ``installationId`` lives (the Keychain in the app); `store` when `nil`.
    public convenience init(
        api: any PushAPI, environment: PushEnvironment, tokenSource: any PushTokenSource,
        store: any PushStateStore, installationStore: (any PushStateStore)? = nil,
        clock: any PushClock = SystemPushClock(), language: String? = nil
    ) {
        self.init(
            api: api, environment: environment, registrationSource: TokenRegistrationSource(tokens: tokenSource),
            store: store, installationStore: installationStore, clock: clock, language: language)
    }

    /// The FID path (an app with `FirebaseMessagingInstallationIdEnabled`): `registrationSource` answers
    /// `Messaging.messaging().register()`'s FID; the other parameters as for the token path.
    ///   - language: the language pushes are worded in; the kit's own when `nil`.
    public init(
        api: any PushAPI, environment: PushEnvironment, registrationSource: any PushRegistrationSource,
        store: any PushStateStore, installationStore: (any PushStateStore)? = nil,
        clock: any PushClock = SystemPushClock(), language: String? = nil
    ) {
        self.api = api
        self.environment = environment
        self.language = language ?? CaregiverPushStrings.preferred().language
        self.source = registrationSource
        self.store = store
        self.installationStore = installationStore ?? store
        self.clock = clock
        reload()
    }

    /// Call whenever the app's session changes: sign-in, sign-out, a switch between caregiver and patient mode.
    ///
    /// A caregiver other than the one the stored state belongs to (or state that belongs to no one) starts from
    /// off: their phone is not registered on the strength of someone else's toggle. The installation id is kept
    /// (it names the install, not the person). The previous caregiver's registration stays on the server until the
    /// new caregiver registers the phone (`TOKEN_REASSIGNED`) or the server finds it stale.
    public func setMode(_ mode: CaregiverPushAppMode) {
        if case .caregiver(let caregiver) = mode {
            let owner = caregiver.uuidString.lowercased()
            if store.string(forKey: StateKey.caregiverID) != owner {
                forget()
                store.set(nil, forKey: StateKey.pendingUnregisterToken)
                store.set(owner, forKey: StateKey.caregiverID)
            }
        }
        self.mode = mode
        reload()
    }

    /// This install's id, made on first use and kept from then on.
    public var installationId: String {
        if let existing = installationStore.string(forKey: StateKey.installationId) { return existing }
        let made = UUID().uuidString.lowercased()
        installationStore.set(made, forKey: StateKey.installationId)
        return made
    }

    /// Call at launch (in a `Task`), after ``setMode(_:)`` with the restored session: registers the current token if
    /// one of the rules above says so. Does nothing while push is off or no caregiver is signed in; failures are kept
    /// for the next launch.
    public func applicationDidLaunch() async {
        guard mode.isCaregiver, isPushEnabled, let registration = try? await source.currentRegistration() else {
            return
        }
        _ = try? await registerIfNeeded(registration)
    }

    /// The phone's current identity (token or FID), from the source the app gave.
    func currentRegistration() async throws -> PushRegistrationID {
        try await source.currentRegistration()
    }

    /// Call from `MessagingDelegate.messaging(_:didReceiveRegistrationToken:)` (the token path).
    public func tokenDidRefresh(_ token: String) async {
        await registrationDidChange(.token(token))
    }

    /// Call from `MessagingDelegate.messaging(_:didReceiveRegistration:)` with `.fid(fid)` (the FID path), or with
    /// `.token` from the token callback.
    public func registrationDidChange(_ registration: PushRegistrationID) async {
        guard mode.isCaregiver, isPushEnabled else { return }
        _ = try? await registerIfNeeded(registration)
    }

    /// Registers `token` when one of the rules says so and push is on.
    /// - Returns: whether a registration was sent (and succeeded).
    /// - Throws: ``PushAPIError`` when the registration was sent and failed.
    @discardableResult
    public func registerIfNeeded(token: String) async throws(PushAPIError) -> Bool {
        try await registerIfNeeded(.token(token))
    }

    /// Registers the phone's token or FID when one of the rules says so and push is on; a move from token to FID is
    /// due at once (and replaces the token's registration on the server).
    /// - Returns: whether a registration was sent (and succeeded).
    /// - Throws: ``PushAPIError`` when the registration was sent and failed.
    @discardableResult
    public func registerIfNeeded(_ registration: PushRegistrationID) async throws(PushAPIError) -> Bool {
        await acquire()
        defer { release() }
        guard mode.isCaregiver, isPushEnabled, needsRegistration(registration) else { return false }
        try await register(registration)
        return true
    }

    /// Turns push on: registers the phone whatever the rules say, then records push as on.
    /// - Throws: ``PushAPIError``; push stays as it was.
    func turnOn(_ registration: PushRegistrationID) async throws(PushAPIError) {
        await acquire()
        defer { release() }
        guard mode.isCaregiver else { return }
        try await register(registration)
        store.set("true", forKey: StateKey.isPushEnabled)
        store.set(nil, forKey: StateKey.offReason)
        reload()
    }

    /// Turns push off: unregisters the registered token (or the current one), then forgets the registration.
    /// - Throws: ``PushAPIError``; push stays on.
    func turnOff() async throws(PushAPIError) {
        await acquire()
        defer { release() }
        var registration = registered()
        if registration == nil { registration = try? await source.currentRegistration() }
        if let registration { try await api.unregister(registration) }
        forget()
    }

    /// Push goes OFF whatever the server says: permission revoked, sign-out. Tries to unregister the registered
    /// token first (while the session still works), then forgets the registration even when that failed.
    /// - Parameter keepPending: keep a failed unregistration for the next re-check (permission revoked); sign-out
    ///   passes `false`, since no session is left to send it with.
    /// - Returns: the failure, when the server could not be told.
    func turnOffLocally(keepPending: Bool) async -> PushAPIError? {
        await acquire()
        defer { release() }
        var failure: PushAPIError?
        if let registration = registered() {
            do {
                try await api.unregister(registration)
            } catch {
                failure = error
                if keepPending {
                    store.set(registration.text, forKey: StateKey.pendingUnregisterToken)
                    store.set(registration.field, forKey: StateKey.pendingUnregisterTarget)
                }
            }
        }
        forget()
        return failure
    }

    /// Sends an unregistration that failed before, if any; forgets it once the server took it.
    func flushPendingUnregister() async {
        await acquire()
        defer { release() }
        guard mode.isCaregiver, let text = store.string(forKey: StateKey.pendingUnregisterToken) else { return }
        let pending = PushRegistrationID(text: text, field: store.string(forKey: StateKey.pendingUnregisterTarget))
        if (try? await api.unregister(pending)) != nil {
            store.set(nil, forKey: StateKey.pendingUnregisterToken)
            store.set(nil, forKey: StateKey.pendingUnregisterTarget)
        }
    }

    /// The server's record of the registered token or FID (`nil`: the server has none).
    func registeredDeviceStatus() async throws(PushAPIError)
        -> (registration: PushRegistrationID, status: CaregiverPushDeviceStatus?)?
    {
        await acquire()
        defer { release() }
        guard let registration = registered() else { return nil }
        return (
            registration,
            try await api.deviceStatus(registration, environment: environment, installationId: installationId)
        )
    }

    /// What was registered last, with its kind.
    private func registered() -> PushRegistrationID? {
        store.string(forKey: StateKey.registeredToken).map {
            PushRegistrationID(text: $0, field: store.string(forKey: StateKey.registeredTarget))
        }
    }

    /// Push is OFF because the server disabled this phone: forgets the registration and keeps the reason.
    func serverDisabled(_ reason: CaregiverPushOffReason) {
        forget()
        store.set(reason.rawValue, forKey: StateKey.offReason)
        reload()
    }

    func setOffReason(_ reason: CaregiverPushOffReason?) {
        store.set(reason?.rawValue, forKey: StateKey.offReason)
        reload()
    }

    /// Sign-out: the push state and its owner are forgotten (the installation id is kept), and the kit is signed
    /// out until the app says who signs in next.
    func signedOut() {
        forget()
        store.set(nil, forKey: StateKey.caregiverID)
        mode = .signedOut
        reload()
    }

    /// The observable copies of the stored state, read again after every change to the store.
    private func reload() {
        let enabled = store.string(forKey: StateKey.isPushEnabled) == "true"
        if isPushEnabled != enabled { isPushEnabled = enabled }
        let reason = store.string(forKey: StateKey.offReason).flatMap(CaregiverPushOffReason.init(rawValue:))
        if offReason != reason { offReason = reason }
    }

    /// Whether a registration is due by the rules above (token or FID, environment or language changed, a day old, last attempt failed).
    func isRegistrationDue(_ registration: PushRegistrationID) -> Bool { needsRegistration(registration) }

    private func forget() {
        for key in [
            StateKey.isPushEnabled, StateKey.registeredToken, StateKey.registeredTarget, StateKey.registeredEnvironment,
            StateKey.registeredLanguage, StateKey.lastSuccessAt,
            StateKey.lastAttemptFailed, StateKey.offReason,
        ] {
            store.set(nil, forKey: key)
        }
        reload()
    }

    private func needsRegistration(_ registration: PushRegistrationID) -> Bool {
        if store.string(forKey: StateKey.lastAttemptFailed) == "true" { return true }
        guard registered() == registration,
            store.string(forKey: StateKey.registeredEnvironment) == environment.rawValue,
            store.string(forKey: StateKey.registeredLanguage) == language,
            let last = store.string(forKey: StateKey.lastSuccessAt).flatMap(Double.init)
        else { return true }
        return clock.now().timeIntervalSince1970 - last >= Self.refreshInterval
    }

    /// Sends one registration and records its outcome. The caller holds the lock.
    private func register(_ registration: PushRegistrationID) async throws(PushAPIError) {
        do {
            try await api.register(
                registration, environment: environment, installationId: installationId, language: language)
        } catch {
            store.set("true", forKey: StateKey.lastAttemptFailed)
            throw error
        }
        store.set(registration.text, forKey: StateKey.registeredToken)
        store.set(
            registration == .token(registration.text) ? nil : registration.field, forKey: StateKey.registeredTarget)
        store.set(environment.rawValue, forKey: StateKey.registeredEnvironment)
        store.set(language, forKey: StateKey.registeredLanguage)
        store.set(String(clock.now().timeIntervalSince1970), forKey: StateKey.lastSuccessAt)
        store.set(nil, forKey: StateKey.lastAttemptFailed)
    }

    // One operation at a time, on the main actor: a waiter is handed the lock directly by `release()`.

    private func acquire() async {
        guard busy else {
            busy = true
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    private func release() {
        if waiting.isEmpty { busy = false } else { waiting.removeFirst().resume() }
    }
}

/// The server calls the kit makes: `push/register` (also with `statusOnly`) and `push/unregister`.
///
/// ``PushAPIClient`` is the real one. The protocol is there so that an app's own unit tests can build
/// ``PushTokenLifecycle`` and ``CaregiverPushSettingsModel`` over a stand-in that answers as told, and test the app's
/// view models around them without a server.
public protocol PushAPI: Sendable {
    /// Registers (or refreshes) this phone's FCM token for the signed-in caregiver. Idempotent on the server.
    /// - Throws: ``PushAPIError``.
    func register(token: String, environment: PushEnvironment, installationId: String?) async throws(PushAPIError)

    /// Stops pushes to this token for the signed-in caregiver.
    /// - Throws: ``PushAPIError``.
    func unregister(token: String) async throws(PushAPIError)

    /// The server's record of this phone for the signed-in caregiver, changing nothing.
    /// - Returns: `nil` when the server has no such device for this caregiver.
    /// - Throws: ``PushAPIError``.
    func deviceStatus(token: String, environment: PushEnvironment, installationId: String?)
        async throws(PushAPIError) -> CaregiverPushDeviceStatus?

    /// Registers (or refreshes) this phone by its token or its FID.
    func register(_ registration: PushRegistrationID, environment: PushEnvironment, installationId: String?)
        async throws(PushAPIError)

    /// Stops pushes to this phone, by its token or its FID.
    func unregister(_ registration: PushRegistrationID) async throws(PushAPIError)

    /// The server's record of this phone, by its token or its FID.
    func deviceStatus(_ registration: PushRegistrationID, environment: PushEnvironment, installationId: String?)
        async throws(PushAPIError) -> CaregiverPushDeviceStatus?

    /// Registers (or refreshes) this phone, with the language its pushes are to be worded in (`ja`, `en`).
    func register(
        _ registration: PushRegistrationID, environment: PushEnvironment, installationId: String?, language: String
    ) async throws(PushAPIError)
}

/// A stand-in written before FIDs implements the token calls only: the token path goes to them, and the FID path is
/// refused as the server would refuse a body it cannot read (422), so an app's tests notice the missing calls. One
/// written before languages registers without one (the server keeps the device's language, Japanese for a new one).
extension PushAPI {
    public func register(
        _ registration: PushRegistrationID, environment: PushEnvironment, installationId: String?, language: String
    ) async throws(PushAPIError) {
        try await register(registration, environment: environment, installationId: installationId)
    }

    public func register(_ registration: PushRegistrationID, environment: PushEnvironment, installationId: String?)
        async throws(PushAPIError)
    {
        guard case .token(let token) = registration else {
            throw .validation([.init(field: "fid", message: "this PushAPI has no FID calls")])
        }
        try await register(token: token, environment: environment, installationId: installationId)
    }

    public func unregister(_ registration: PushRegistrationID) async throws(PushAPIError) {
        guard case .token(let token) = registration else {
            throw .validation([.init(field: "fid", message: "this PushAPI has no FID calls")])
        }
        try await unregister(token: token)
    }

    public func deviceStatus(
        _ registration: PushRegistrationID, environment: PushEnvironment, installationId: String?
    ) async throws(PushAPIError) -> CaregiverPushDeviceStatus? {
        guard case .token(let token) = registration else {
            throw .validation([.init(field: "fid", message: "this PushAPI has no FID calls")])
        }
        return try await deviceStatus(token: token, environment: environment, installationId: installationId)
    }
}

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
}

import CaregiverPushClient
import Foundation

// The stand-ins the kit's tests may use: the phone's own pieces — permission, FCM token source, store, clock — and,
// for the server-free tests, the API. Everything else is real.

/// Answers the permission prompt as told, reports the Settings app's switch as told, and notes what the model
/// showed while asking.
@MainActor
public final class FakePermission: NotificationPermission {
    public var granted: Bool
    /// What `notificationSettings()` reports; the Settings app's switch.
    public var status: CaregiverPushPermissionStatus
    public private(set) var requests = 0
    /// Read at the moment permission is requested (the seeds check `isUpdating` there).
    public var onRequest: () -> Void = {}

    public init(granted: Bool) {
        self.granted = granted
        self.status = granted ? .allowed : .notDetermined
    }

    public func requestAuthorization() async throws -> Bool {
        requests += 1
        onRequest()
        status = granted ? .allowed : .denied
        return granted
    }

    public func authorizationStatus() async -> CaregiverPushPermissionStatus { status }
}

/// Gives the token it holds, as `Messaging.messaging().token()` would — or, while ``holdsBack``, answers only when
/// ``release()`` is called, and not when cancelled (Firebase's fetch promises neither).
@MainActor
public final class FakeTokenSource: PushTokenSource {
    public var token: String
    public private(set) var requests = 0
    public var holdsBack = false
    private var held: [CheckedContinuation<String, Never>] = []

    public init(_ token: String) { self.token = token }

    public func currentToken() async throws -> String {
        requests += 1
        guard holdsBack else { return token }
        return await withCheckedContinuation { held.append($0) }
    }

    /// Answers every fetch held back so far.
    public func release() {
        holdsBack = false
        for continuation in held { continuation.resume(returning: token) }
        held = []
    }
}

/// `Messaging.messaging().register()` on the FID path: answers the FID it holds.
@MainActor
public final class FakeFIDSource: PushRegistrationSource {
    public var fid: String
    public private(set) var requests = 0

    public init(_ fid: String) { self.fid = fid }

    public func currentRegistration() async throws -> PushRegistrationID {
        requests += 1
        return .fid(fid)
    }
}

/// `UserDefaults` (or the Keychain) in memory; a reinstall is a new `MemoryStore`.
@MainActor
public final class MemoryStore: PushStateStore {
    public private(set) var values: [String: String]

    public init(_ values: [String: String] = [:]) { self.values = values }

    public func string(forKey key: String) -> String? { values[key] }
    public func set(_ value: String?, forKey key: String) { values[key] = value }
}

/// A clock the test moves.
public final class MovableClock: PushClock, Sendable {
    private let time = Locked(Date(timeIntervalSince1970: 1_790_000_000))

    public init() {}

    public var current: Date {
        get { time.withLock { $0 } }
        set { time.withLock { $0 = newValue } }
    }

    public func now() -> Date { current }
}

/// The API answering as told, keeping every call: what an app's own tests stand in for ``PushAPIClient``.
public actor StubPushAPI: PushAPI {
    public enum Call: Sendable, Hashable {
        case register(token: String, environment: PushEnvironment, installationId: String?)
        case unregister(token: String)
        case deviceStatus(token: String)
        case registerFID(fid: String, environment: PushEnvironment, installationId: String?)
        case unregisterFID(fid: String)
        case deviceStatusFID(fid: String)
    }

    public private(set) var calls: [Call] = []
    /// The language of each registration that carried one, in order.
    public private(set) var languages: [String] = []
    /// Thrown by the next call, then cleared.
    public var nextFailure: PushAPIError?
    /// What ``deviceStatus(token:environment:installationId:)`` answers.
    public var status: CaregiverPushDeviceStatus? = CaregiverPushDeviceStatus(enabled: true, disabledReason: nil)

    public init() {}

    public func failNext(_ error: PushAPIError) { nextFailure = error }

    public func register(token: String, environment: PushEnvironment, installationId: String?)
        async throws(PushAPIError)
    {
        try record(.register(token: token, environment: environment, installationId: installationId))
    }

    public func unregister(token: String) async throws(PushAPIError) {
        try record(.unregister(token: token))
    }

    public func deviceStatus(token: String, environment: PushEnvironment, installationId: String?)
        async throws(PushAPIError) -> CaregiverPushDeviceStatus?
    {
        try record(.deviceStatus(token: token))
        return status
    }

    public func register(_ registration: PushRegistrationID, environment: PushEnvironment, installationId: String?)
        async throws(PushAPIError)
    {
        switch registration {
        case .token(let token):
            try await register(token: token, environment: environment, installationId: installationId)
        case .fid(let fid):
            try record(.registerFID(fid: fid, environment: environment, installationId: installationId))
        }
    }

    public func register(
        _ registration: PushRegistrationID, environment: PushEnvironment, installationId: String?, language: String
    ) async throws(PushAPIError) {
        try await register(registration, environment: environment, installationId: installationId)
        languages.append(language)
    }

    public func unregister(_ registration: PushRegistrationID) async throws(PushAPIError) {
        switch registration {
        case .token(let token): try await unregister(token: token)
        case .fid(let fid): try record(.unregisterFID(fid: fid))
        }
    }

    public func deviceStatus(_ registration: PushRegistrationID, environment: PushEnvironment, installationId: String?)
        async throws(PushAPIError) -> CaregiverPushDeviceStatus?
    {
        switch registration {
        case .token(let token):
            return try await deviceStatus(token: token, environment: environment, installationId: installationId)
        case .fid(let fid):
            try record(.deviceStatusFID(fid: fid))
            return status
        }
    }

    private func record(_ call: Call) throws(PushAPIError) {
        calls.append(call)
        if let failure = nextFailure {
            nextFailure = nil
            throw failure
        }
    }

    /// The registrations so far.
    public var registrations: [String] {
        calls.compactMap { if case .register(let token, _, _) = $0 { token } else { nil } }
    }
}

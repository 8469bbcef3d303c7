#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Foundation

/// `POST /api/push/register` and `POST /api/push/unregister` for the signed-in caregiver. Replaces the
/// app's `APIClient.registerPushDevice` / `unregisterPushDevice`.
///
/// Each call takes a fresh bearer token from `accessToken` (the caregiver's Supabase access token), sends JSON, and
/// turns every answer other than a 200 into a ``PushAPIError``, within its ``CaregiverPushRequestBudget``. A 401 is
/// tried once more with the token `refreshedAccessToken` gives (the app refreshes its session), when the app passes
/// one. A cancelled call stops at once, as ``PushAPIError/network(_:)`` with `URLError.Code.cancelled`. It logs
/// nothing, so neither the device token nor the bearer token can reach a log through it.
public struct PushAPIClient: PushAPI {
    /// The platform this client registers; the server accepts `ios` today.
    public static let platform = "ios"

    private let baseURL: URL
    private let accessToken: @Sendable () async throws -> String
    private let refreshedAccessToken: (@Sendable () async throws -> String)?
    private let session: URLSession
    public let budget: CaregiverPushRequestBudget

    /// - Parameters:
    ///   - baseURL: the API's origin, e.g. `https://api.example.com` (the paths start with `/api/push/`).
    ///   - budget: how long a call may take, retries included (``CaregiverPushRequestBudget/standard``, 5 s, by
    ///     default).
    ///   - refreshedAccessToken: after a 401, a bearer token from a session the app has just refreshed (Supabase's
    ///     `refreshSession()`); the call is tried once more with it. Throwing, or `nil` (no refresh), means sign in
    ///     again (``PushAPIError/signInRequired``).
    ///   - accessToken: the caregiver's current bearer token; throwing means there is no session
    ///     (``PushAPIError/signInRequired``).
    public init(
        baseURL: URL, budget: CaregiverPushRequestBudget = .standard,
        refreshedAccessToken: (@Sendable () async throws -> String)? = nil,
        accessToken: @escaping @Sendable () async throws -> String
    ) {
        self.baseURL = baseURL
        self.accessToken = accessToken
        self.refreshedAccessToken = refreshedAccessToken
        self.budget = budget
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = budget.attemptTimeout
        configuration.timeoutIntervalForResource = budget.attemptTimeout
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        self.session = URLSession(configuration: configuration)
    }

    /// Registers (or refreshes) this phone's FCM token for the caregiver. Idempotent on the server.
    /// - Parameters:
    ///   - installationId: stable per app install; the server disables this caregiver's older devices with the same
    ///     id (`REPLACED`) when the token rotates.
    /// - Throws: ``PushAPIError``.
    public func register(token: String, environment: PushEnvironment, installationId: String?)
        async throws(PushAPIError)
    {
        try await register(.token(token), environment: environment, installationId: installationId)
    }

    /// Registers (or refreshes) this phone by its token or its Firebase Installation ID (`fid` in the body).
    /// - Throws: ``PushAPIError``.
    public func register(_ registration: PushRegistrationID, environment: PushEnvironment, installationId: String?)
        async throws(PushAPIError)
    {
        _ = try await post("api/push/register", body(registration, environment, installationId))
    }

    /// Registers (or refreshes) this phone with the language its pushes are worded in (`language` in the body).
    /// - Throws: ``PushAPIError``.
    public func register(
        _ registration: PushRegistrationID, environment: PushEnvironment, installationId: String?, language: String
    ) async throws(PushAPIError) {
        var body = body(registration, environment, installationId)
        body["language"] = .string(language)
        _ = try await post("api/push/register", body)
    }

    /// Stops pushes to this token for the caregiver (the server soft-disables it; `200` also when nothing matched).
    /// - Throws: ``PushAPIError``.
    public func unregister(token: String) async throws(PushAPIError) {
        try await unregister(.token(token))
    }

    /// Stops pushes to this phone, by its token or its FID.
    /// - Throws: ``PushAPIError``.
    public func unregister(_ registration: PushRegistrationID) async throws(PushAPIError) {
        _ = try await post("api/push/unregister", [registration.field: .string(registration.text)])
    }

    /// The server's record of this phone for the caregiver, changing nothing (`push/register` with
    /// `statusOnly: true`): whether it is enabled and, when not, why (`UNREGISTERED` when FCM rejected the token).
    /// - Returns: `nil` when the server has no such device for this caregiver.
    /// - Throws: ``PushAPIError``.
    public func deviceStatus(token: String, environment: PushEnvironment, installationId: String?)
        async throws(PushAPIError) -> CaregiverPushDeviceStatus?
    {
        try await deviceStatus(.token(token), environment: environment, installationId: installationId)
    }

    /// The server's record of this phone, by its token or its FID.
    /// - Throws: ``PushAPIError``.
    public func deviceStatus(_ registration: PushRegistrationID, environment: PushEnvironment, installationId: String?)
        async throws(PushAPIError) -> CaregiverPushDeviceStatus?
    {
        var body = body(registration, environment, installationId)
        body["statusOnly"] = .bool(true)
        let data = try await post("api/push/register", body)
        guard let answer = try? JSONDecoder().decode(StatusBody.self, from: data), answer.ok else {
            throw .unexpectedAnswer
        }
        return answer.device
    }

    private func body(_ registration: PushRegistrationID, _ environment: PushEnvironment, _ installationId: String?)
        -> [String: BodyValue]
    {
        var body: [String: BodyValue] = [
            registration.field: .string(registration.text), "platform": .string(Self.platform),
            "environment": .string(environment.rawValue),
        ]
        if let installationId { body["installationId"] = .string(installationId) }
        return body
    }

    /// One call: attempts until one answers, the failure is not transient, the call is cancelled, or the budget is
    /// spent. A 401 is tried once more with a refreshed session's token.
    private func post(_ path: String, _ body: [String: BodyValue]) async throws(PushAPIError) -> Data {
        var bearer: String
        do { bearer = try await accessToken() } catch { throw .signInRequired }
        var refreshed = false
        let deadline = ContinuousClock.now + .milliseconds(Int(budget.total * 1000))
        while true {
            guard !Task.isCancelled else { throw .network(.cancelled) }
            let remaining = ContinuousClock.now.duration(to: deadline)
            let seconds = Double(remaining.components.seconds) + Double(remaining.components.attoseconds) * 1e-18
            guard seconds > 0.05 else { throw .timedOut }
            do {
                return try await attempt(path, body, bearer: bearer, timeout: min(budget.attemptTimeout, seconds))
            } catch {
                // An access token expires while the app runs; the app's session can be refreshed once, not in a loop.
                if error == .signInRequired, !refreshed, let refreshedAccessToken {
                    refreshed = true
                    do { bearer = try await refreshedAccessToken() } catch { throw .signInRequired }
                    continue
                }
                guard error.isTransient, !Task.isCancelled else { throw error }
                let afterPause = ContinuousClock.now + .milliseconds(Int(budget.retryDelay * 1000))
                // Another attempt only while it can still get a whole second's worth of time.
                guard afterPause.duration(to: deadline) > .seconds(1) else { throw error }
                // Cancelled during the pause (the screen went away): no further attempt.
                do { try await Task.sleep(until: afterPause) } catch { throw .network(.cancelled) }
            }
        }
    }

    private func attempt(_ path: String, _ body: [String: BodyValue], bearer: String, timeout: TimeInterval)
        async throws(PushAPIError) -> Data
    {
        var request = URLRequest(url: baseURL.appendingPathComponent(path), timeoutInterval: timeout)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization")
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        request.httpBody = try? encoder.encode(body)
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: request)
        } catch let error as URLError {
            throw error.code == .timedOut ? .timedOut : .network(error.code)
        } catch is CancellationError {
            throw .network(.cancelled)
        } catch {
            throw .network(.unknown)
        }
        guard let http = response as? HTTPURLResponse else { throw .unexpectedAnswer }
        try Self.check(status: http.statusCode, retryAfter: http.value(forHTTPHeaderField: "Retry-After"), body: data)
        return data
    }

    /// Maps an answer to success or a ``PushAPIError``: a 200 whose body has `"ok": true` is the only success.
    static func check(status: Int, retryAfter: String?, body: Data) throws(PushAPIError) {
        let problem = try? JSONDecoder().decode(ProblemBody.self, from: body)
        switch status {
        case 200:
            guard (try? JSONDecoder().decode(OKBody.self, from: body))?.ok == true else { throw .unexpectedAnswer }
        case 401: throw .signInRequired
        case 422 where problem?.type == "/problems/validation": throw .validation(problem?.errors ?? [])
        case 503:
            throw .unavailable(retryAfterSeconds: retryAfter.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) })
        default: throw .server(status: status, problemType: problem?.type)
        }
    }

    private enum BodyValue: Encodable {
        case string(String)
        case bool(Bool)

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .string(let text): try container.encode(text)
            case .bool(let flag): try container.encode(flag)
            }
        }
    }

    private struct OKBody: Decodable { let ok: Bool }

    private struct StatusBody: Decodable {
        let ok: Bool
        let device: CaregiverPushDeviceStatus?
    }

    /// The fields of an RFC 9457 problem this client reads.
    private struct ProblemBody: Decodable {
        let type: String?
        let errors: [PushAPIError.FieldError]?
    }
}

/// The server's record of one device (`push/register` with `statusOnly`).
public struct CaregiverPushDeviceStatus: Sendable, Hashable, Decodable {
    public let enabled: Bool
    /// Why it is disabled: `UNREGISTERED`, `INVALID_ARGUMENT`, `SENDER_ID_MISMATCH` (FCM rejected the token),
    /// `STALE` (not seen for months), `TOKEN_REASSIGNED` (another account registered this phone), `REPLACED` (a newer
    /// token of this install), `USER_DISABLED`; `nil` while enabled.
    public let disabledReason: String?

    public init(enabled: Bool, disabledReason: String?) {
        self.enabled = enabled
        self.disabledReason = disabledReason
    }
}

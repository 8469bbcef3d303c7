#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Foundation

/// `POST /api/push/register` and `POST /api/push/unregister` for the signed-in caregiver (seeds' T027, SPEC §6).
///
/// Each call takes a fresh bearer token from `accessToken` (the caregiver's Supabase access token), sends JSON, and
/// turns every answer other than `200 {"ok": true}` into a ``PushAPIError``. It logs nothing, so neither the device
/// token nor the bearer token can reach a log through it.
public struct PushAPIClient: Sendable {
    /// The platform this client registers; the server accepts `ios` today.
    public static let platform = "ios"

    private let baseURL: URL
    private let accessToken: @Sendable () async throws -> String
    private let session: URLSession
    private let timeout: TimeInterval

    /// - Parameters:
    ///   - baseURL: the API's origin, e.g. `https://api.example.com` (the paths start with `/api/push/`).
    ///   - timeout: the longest wait for an answer, in seconds; then ``PushAPIError/timedOut``.
    ///   - accessToken: the caregiver's current bearer token; throwing means there is no session
    ///     (``PushAPIError/signInRequired``).
    public init(
        baseURL: URL, timeout: TimeInterval = 15, accessToken: @escaping @Sendable () async throws -> String
    ) {
        self.baseURL = baseURL
        self.accessToken = accessToken
        self.timeout = timeout
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.timeoutIntervalForResource = timeout
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
        var body = ["token": token, "platform": Self.platform, "environment": environment.rawValue]
        if let installationId { body["installationId"] = installationId }
        try await post("api/push/register", body)
    }

    /// Stops pushes to this token for the caregiver (the server soft-disables it; `200` also when nothing matched).
    /// - Throws: ``PushAPIError``.
    public func unregister(token: String) async throws(PushAPIError) {
        try await post("api/push/unregister", ["token": token])
    }

    private func post(_ path: String, _ body: [String: String]) async throws(PushAPIError) {
        let bearer: String
        do { bearer = try await accessToken() } catch { throw .signInRequired }
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
        } catch {
            throw .network(.unknown)
        }
        guard let http = response as? HTTPURLResponse else { throw .unexpectedAnswer }
        try Self.check(status: http.statusCode, retryAfter: http.value(forHTTPHeaderField: "Retry-After"), body: data)
    }

    /// Maps an answer to success or a ``PushAPIError``: `200 {"ok": true}` is the only success.
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

    private struct OKBody: Decodable { let ok: Bool }

    /// The fields of an RFC 9457 problem this client reads.
    private struct ProblemBody: Decodable {
        let type: String?
        let errors: [PushAPIError.FieldError]?
    }
}

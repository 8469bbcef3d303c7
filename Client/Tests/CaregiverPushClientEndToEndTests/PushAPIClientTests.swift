import CaregiverPushClient
import CaregiverPushClientTestSupport
import Foundation
import Testing

/// The API client over real HTTP: the runner's answers decoded into typed errors, and the transport's failures.
@Suite("kit: the API client against the runner", .timeLimit(.minutes(2)))
struct PushAPIClientTests {
    static func client(_ url: URL, bearer: String?, budget: CaregiverPushRequestBudget = .standard) -> PushAPIClient {
        PushAPIClient(baseURL: url, budget: budget) {
            guard let bearer else { throw CocoaError(.userCancelled) }
            return bearer
        }
    }

    @Test("register and unregister answer 200 {ok: true}, and the row follows")
    func happyPath() async throws {
        let server = try RunnerServer.forClient()
        let caregiver = UUID()
        let api = Self.client(server.baseURL, bearer: try caregiverToken(caregiver))
        let token = makeDeviceToken()
        try await api.register(token: token, environment: .prod, installationId: "install-1")
        var rows = try TestDatabase.with { try Seed.devices($0, owner: caregiver) }
        #expect(rows.count == 1 && rows.first?.environment == "PROD" && rows.first?.installationID == "install-1")
        try await api.unregister(token: token)
        rows = try TestDatabase.with { try Seed.devices($0, owner: caregiver) }
        #expect(rows.first?.isEnabled == false)
    }

    @Test("422: every invalid field with the server's message; the description names fields, never the token")
    func validation() async throws {
        let server = try RunnerServer.forClient()
        let api = Self.client(server.baseURL, bearer: try caregiverToken(UUID()))
        let badToken = "not a token/with spaces"
        let error = await #expect(throws: PushAPIError.self) {
            try await api.register(
                token: badToken, environment: .dev, installationId: String(repeating: "i", count: 129))
        }
        guard case .validation(let fields) = error else {
            Issue.record("expected a validation error, got \(String(describing: error))")
            return
        }
        #expect(fields.map(\.field).sorted() == ["installationId", "token"])
        #expect(fields.allSatisfy { !$0.message.isEmpty })
        #expect(fields.first { $0.field == "token" }?.message.contains("512") == true)
        #expect(error?.description.contains(badToken) == false)
    }

    @Test("401 from the server, or no session to take a bearer token from → sign in again")
    func unauthorized() async throws {
        let server = try RunnerServer.forClient()
        let expired = try caregiverToken(UUID(), expiresIn: -600)
        await #expect(throws: PushAPIError.signInRequired) {
            try await Self.client(server.baseURL, bearer: expired).register(
                token: makeDeviceToken(), environment: .dev, installationId: nil)
        }
        await #expect(throws: PushAPIError.signInRequired) {
            try await Self.client(server.baseURL, bearer: nil).unregister(token: makeDeviceToken())
        }
        #expect(server.registrations(atLeast: 1) == 1)
        #expect(PushAPIError.signInRequired.errorState == .signInRequired)
    }

    @Test("503 with Retry-After when the server's database is unreachable")
    func unavailable() async throws {
        let server = try PushTokenLifecycleTests.serverWithoutDatabase()
        let api = Self.client(server.baseURL, bearer: try caregiverToken(UUID()))
        await #expect(throws: PushAPIError.unavailable(retryAfterSeconds: 5)) {
            try await api.unregister(token: makeDeviceToken())
        }
    }

    @Test("a server that never answers → timed out after the client's timeout; a closed port → network error")
    func transportFailures() async throws {
        let silent = try SilentListener()
        await #expect(throws: PushAPIError.timedOut) {
            try await Self.client(silent.url, bearer: "x", budget: .init(total: 1, attemptTimeout: 1)).unregister(
                token: makeDeviceToken())
        }
        let closed = try SilentListener()
        closed.close()
        let error = await #expect(throws: PushAPIError.self) {
            try await Self.client(closed.url, bearer: "x").unregister(token: makeDeviceToken())
        }
        guard case .network = error else {
            Issue.record("expected a network error, got \(String(describing: error))")
            return
        }
    }

    @Test(
        "any other answer is a server error with its status and problem type (a base URL with a wrong prefix: 404)")
    func otherAnswers() async throws {
        let server = try RunnerServer.forClient()
        let api = Self.client(server.baseURL.appendingPathComponent("v2"), bearer: try caregiverToken(UUID()))
        let error = await #expect(throws: PushAPIError.self) { try await api.unregister(token: makeDeviceToken()) }
        guard case .server(404, let type?) = error else {
            Issue.record("expected a 404 problem, got \(String(describing: error))")
            return
        }
        #expect(type.hasPrefix("/problems/"))
    }
}

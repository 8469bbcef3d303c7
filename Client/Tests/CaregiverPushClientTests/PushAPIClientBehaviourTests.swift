import CaregiverPushClient
import CaregiverPushClientTestSupport
import Foundation
import Testing

/// The API client's own rules over real HTTP to a loopback server with canned answers (no project server): a 401
/// tried once more after the app refreshes its session, and cancellation stopping the retry pause.
@Suite("kit: the API client's session refresh and cancellation", .timeLimit(.minutes(1)))
struct PushAPIClientBehaviourTests {
    @Test("a 401 is tried once more with the refreshed session's token, and succeeds")
    func refreshedOnce() async throws {
        let server = try CannedHTTPServer(answers: [.unauthorized, .ok])
        let api = PushAPIClient(baseURL: server.url, refreshedAccessToken: { "fresh" }) { "stale" }
        try await api.register(token: "fcm-token", environment: .dev, installationId: nil)
        #expect(server.requests.map(\.authorization) == ["Bearer stale", "Bearer fresh"])
        #expect(server.requests.map(\.path) == ["/api/push/register", "/api/push/register"])
    }

    @Test("a 401 again after the refresh, a refresh that fails, or no refresh → sign in, never a loop")
    func refreshedOnlyOnce() async throws {
        let server = try CannedHTTPServer(answers: [.unauthorized])
        let api = PushAPIClient(baseURL: server.url, refreshedAccessToken: { "fresh" }) { "stale" }
        await #expect(throws: PushAPIError.signInRequired) { try await api.unregister(token: "fcm-token") }
        #expect(server.requests.count == 2)

        let failing = try CannedHTTPServer(answers: [.unauthorized, .ok])
        let noSession = PushAPIClient(
            baseURL: failing.url, refreshedAccessToken: { throw CocoaError(.userCancelled) }
        ) { "stale" }
        await #expect(throws: PushAPIError.signInRequired) { try await noSession.unregister(token: "fcm-token") }
        #expect(failing.requests.count == 1)

        let plain = try CannedHTTPServer(answers: [.unauthorized, .ok])
        await #expect(throws: PushAPIError.signInRequired) {
            try await PushAPIClient(baseURL: plain.url) { "stale" }.unregister(token: "fcm-token")
        }
        #expect(plain.requests.count == 1)
    }

    @Test("cancelled during the pause before a retry: stops at once as cancelled, no further attempt")
    func cancelledDuringPause() async throws {
        let server = try CannedHTTPServer(answers: [.unavailable])
        // A 503 now, then a 5 s pause before the retry, within a 10 s budget.
        let api = PushAPIClient(
            baseURL: server.url, budget: CaregiverPushRequestBudget(total: 10, attemptTimeout: 2, retryDelay: 5)
        ) { "bearer" }
        let call = Task { try await api.register(token: "fcm-token", environment: .dev, installationId: nil) }
        for _ in 0..<200 where server.requests.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(200))
        let clock = ContinuousClock()
        let cancelledAt = clock.now
        call.cancel()
        let result = await call.result
        let elapsed = clock.now - cancelledAt
        #expect(elapsed < .seconds(1), "took \(elapsed) after cancellation")
        #expect(throws: PushAPIError.network(.cancelled)) { try result.get() }
        #expect(server.requests.count == 1)
        #expect(PushAPIError.network(.cancelled).errorState == .retry)
    }

    @Test("an API client behind the protocol: an app's own tests stand it in")
    func protocolStandIn() async throws {
        let api: any PushAPI = StubPushAPI()
        try await api.register(token: "t", environment: .prod, installationId: "i")
        #expect(await (api as? StubPushAPI)?.calls == [.register(token: "t", environment: .prod, installationId: "i")])
    }

    @Test("the mapping by problem type, status and transport")
    func mapping() {
        #expect(PushAPIError.server(status: 500, problemType: "/problems/internal").errorState == .retry)
        #expect(PushAPIError.server(status: 502, problemType: nil).errorState == .retry)
        #expect(PushAPIError.server(status: 403, problemType: "/problems/forbidden").errorState == .signInRequired)
        #expect(
            PushAPIError.server(status: 415, problemType: "/problems/unsupported-media-type").errorState
                == .reportBug(problemType: "/problems/unsupported-media-type"))
        #expect(PushAPIError.timedOut.errorState == .retry && PushAPIError.unexpectedAnswer.errorState == .retry)
        #expect(PushAPIError.validation([]).errorState.action == .reportBug)
    }
}

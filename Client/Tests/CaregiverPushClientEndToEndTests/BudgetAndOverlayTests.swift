import CaregiverPushClient
import CaregiverPushClientTestSupport
import Foundation
import Testing

/// The 5 s from tap to state, and the overlay covering the registration: measured against the real
/// runner (warm, so that a function's cold start does not count) behind an injected slow network (``SlowProxy``).
/// The timings are taken off the main actor, where the other suites' work cannot delay them.
@Suite(
    "kit: the 5 s budget and the overlay", .serialized, .timeLimit(.minutes(2)))
struct BudgetAndOverlayTests {
    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
    }

    /// A warm runner whose push-register and push-unregister workers are already up.
    static func warmServer() async throws -> (RunnerServer, String) {
        let server = try RunnerServer.forClient(mode: "warm")
        let bearer = try caregiverToken(UUID())
        let api = PushAPIClient(baseURL: server.baseURL) { bearer }
        try await api.register(token: makeDeviceToken(), environment: .dev, installationId: nil)
        try await api.unregister(token: makeDeviceToken())
        return (server, bearer)
    }

    @Test("a slow network (1 s per answer): registered within the 5 s budget, in one attempt")
    func slowButWithinBudget() async throws {
        let (server, bearer) = try await Self.warmServer()
        let proxy = try SlowProxy(upstreamPort: server.port, delay: .seconds(1))
        let api = PushAPIClient(baseURL: proxy.url) { bearer }
        let clock = ContinuousClock()
        let start = clock.now
        try await api.register(token: makeDeviceToken(), environment: .dev, installationId: nil)
        let elapsed = Self.seconds(clock.now - start)
        print("budget: register through a 1 s network took \(elapsed) s (budget \(api.budget.total) s)")
        #expect(elapsed >= 1 && elapsed < api.budget.total)
        #expect(proxy.requestCount == 1)
    }

    @Test("a network slower than the budget: the call gives up at 5 s, after a second attempt, as a timeout")
    func slowerThanBudget() async throws {
        let (server, bearer) = try await Self.warmServer()
        let proxy = try SlowProxy(upstreamPort: server.port, delay: .seconds(30))
        let api = PushAPIClient(baseURL: proxy.url) { bearer }
        let clock = ContinuousClock()
        let start = clock.now
        await #expect(throws: PushAPIError.timedOut) {
            try await api.register(token: makeDeviceToken(), environment: .dev, installationId: nil)
        }
        let elapsed = Self.seconds(clock.now - start)
        print("budget: register through a 30 s network gave up after \(elapsed) s (budget \(api.budget.total) s)")
        // Two attempts of 2 s and the pause between them: the budget, not the 30 s network, decides when the
        // caregiver hears back.
        #expect(proxy.requestCount == 2)
        #expect(elapsed >= 2 * api.budget.attemptTimeout && elapsed <= api.budget.total + 0.5)
        #expect(PushAPIError.timedOut.errorState == .retry)
    }

    @MainActor
    @Test("the overlay is up exactly while register and unregister are in flight, and the state follows at its end")
    func overlayCoversTheRequests() async throws {
        let (server, _) = try await Self.warmServer()
        let proxy = try SlowProxy(upstreamPort: server.port, delay: .seconds(1))
        let app = CaregiverApp(baseURL: proxy.url)
        for enable in [true, false] {
            #expect(!app.settings.isUpdating)
            let before = proxy.requestCount
            let change = Task { await app.settings.setPushEnabled(enable) }
            for _ in 0..<500 where proxy.requestCount == before { try await Task.sleep(for: .milliseconds(10)) }
            #expect(proxy.requestCount == before + 1)
            #expect(app.settings.isUpdating && app.settings.isPushEnabled != enable)
            await change.value
            #expect(!app.settings.isUpdating && app.settings.isPushEnabled == enable)
        }
    }

    @MainActor
    @Test("the toggle through a network slower than the budget: OFF, not updating, the retry state")
    func toggleGivesUp() async throws {
        let (server, _) = try await Self.warmServer()
        let proxy = try SlowProxy(upstreamPort: server.port, delay: .seconds(30))
        let app = CaregiverApp(baseURL: proxy.url)
        await app.settings.setPushEnabled(true)
        #expect(!app.settings.isUpdating && !app.settings.isPushEnabled && app.settings.errorState == .retry)
    }
}

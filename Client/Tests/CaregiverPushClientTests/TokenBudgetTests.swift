import CaregiverPushClient
import CaregiverPushClientTestSupport
import Foundation
import Testing

/// The toggle's 5 s budget covers the FCM token fetch as well as the registration: the overlay the caregiver sees is
/// up for at most the budget after the permission prompt, even when Firebase's token fetch never answers.
@MainActor
@Suite("kit: the token fetch within the 5 s budget")
struct TokenBudgetTests {
    @Test(
        "a token fetch that does not answer: the toggle gives up at the budget, OFF, the token state; a late token registers nothing"
    )
    func tokenFetchHangs() async throws {
        let api = StubPushAPI()
        let tokenSource = FakeTokenSource("fcm-late")
        tokenSource.holdsBack = true
        let lifecycle = PushTokenLifecycle(api: api, environment: .dev, tokenSource: tokenSource, store: MemoryStore())
        lifecycle.setMode(.caregiver(UUID()))
        let budget = CaregiverPushRequestBudget(total: 0.5, attemptTimeout: 0.5)
        let settings = CaregiverPushSettingsModel(
            lifecycle: lifecycle, permission: FakePermission(granted: true), budget: budget)
        let change = Task { await settings.setPushEnabled(true) }
        // 300 looks, at least 3 s, for the toggle to settle while the token is still held back; without a deadline
        // it would wait for the token for ever. (Looks, not a clock: other suites may keep the main actor busy.)
        for look in 0..<300 where settings.isUpdating || look < 10 {
            try await Task.sleep(for: .milliseconds(10))
        }
        let settled = !settings.isUpdating
        tokenSource.release()
        await change.value
        #expect(settled, "still updating 3 s after the tap, with a 0.5 s budget")
        #expect(!settings.isPushEnabled && settings.errorState == .tokenUnavailable)
        // The token arrives after the deadline: nothing registers, push stays OFF.
        try await Task.sleep(for: .milliseconds(200))
        let calls = await api.calls
        #expect(calls.isEmpty && !settings.isPushEnabled)
    }

    @Test("a token in time: registered, ON, within the budget")
    func tokenInTime() async {
        let api = StubPushAPI()
        let lifecycle = PushTokenLifecycle(
            api: api, environment: .dev, tokenSource: FakeTokenSource("fcm-now"), store: MemoryStore())
        lifecycle.setMode(.caregiver(UUID()))
        let settings = CaregiverPushSettingsModel(lifecycle: lifecycle, permission: FakePermission(granted: true))
        await settings.setPushEnabled(true)
        let registrations = await api.registrations
        #expect(settings.isPushEnabled && settings.errorState == nil && registrations == ["fcm-now"])
    }

    @Test("a failed registration keeps its own error state inside the budget")
    func registrationFails() async {
        let api = StubPushAPI()
        await api.failNext(.server(status: 422, problemType: "/problems/validation"))
        let lifecycle = PushTokenLifecycle(
            api: api, environment: .dev, tokenSource: FakeTokenSource("fcm-now"), store: MemoryStore())
        lifecycle.setMode(.caregiver(UUID()))
        let settings = CaregiverPushSettingsModel(lifecycle: lifecycle, permission: FakePermission(granted: true))
        await settings.setPushEnabled(true)
        #expect(!settings.isPushEnabled && settings.errorState == .reportBug(problemType: "/problems/validation"))
    }
}

import CaregiverPushClient
import CaregiverPushClientTestSupport
import Foundation
import Observation
import Testing

/// The kit fails closed: no session the app told it of means no push, the mode is observable, and the stored push
/// state belongs to one caregiver. Server-free: the API is a stand-in that keeps every call.
@MainActor
@Suite("kit: fails closed")
struct FailClosedTests {
    @MainActor
    struct Phone {
        let api = StubPushAPI()
        let store = MemoryStore()
        let tokenSource = FakeTokenSource("fcm-token-1")
        let permission = FakePermission(granted: true)
        let lifecycle: PushTokenLifecycle
        let settings: CaregiverPushSettingsModel

        init() {
            lifecycle = PushTokenLifecycle(
                api: api, environment: .dev, tokenSource: tokenSource, store: store, installationStore: MemoryStore())
            settings = CaregiverPushSettingsModel(lifecycle: lifecycle, permission: permission)
        }
    }

    /// A flag set from `withObservationTracking`'s `onChange`, which may run on any thread.
    final class Changed: Sendable {
        private let flag = Locked(false)
        func set() { flag.withLock { $0 = true } }
        var value: Bool { flag.withLock { $0 } }
    }

    @Test("an app that never sets the mode registers nothing: no settings, the toggle, launch and callbacks do nothing")
    func noModeNoPush() async {
        let phone = Phone()
        #expect(phone.lifecycle.mode == .signedOut && !phone.settings.isAvailable)
        await phone.settings.setPushEnabled(true)
        await phone.lifecycle.applicationDidLaunch()
        await phone.lifecycle.tokenDidRefresh("fcm-token-2")
        #expect(await phone.settings.recheck() == .notApplicable)
        #expect(!phone.settings.isPushEnabled && phone.permission.requests == 0 && phone.tokenSource.requests == 0)
        let calls = await phone.api.calls
        #expect(calls.isEmpty)
    }

    @Test("a mode change is observable through the settings model, as SwiftUI reads it")
    func modeObservable() {
        let phone = Phone()
        let changed = Changed()
        withObservationTracking {
            _ = phone.settings.isAvailable
        } onChange: {
            changed.set()
        }
        phone.lifecycle.setMode(.caregiver(UUID()))
        #expect(changed.value && phone.settings.isAvailable)
    }

    @Test("another caregiver signing in after a session that ended without sign-out starts from off")
    func anotherCaregiverStartsOff() async {
        let phone = Phone()
        let first = UUID()
        phone.lifecycle.setMode(.caregiver(first))
        await phone.settings.setPushEnabled(true)
        let registered = await phone.api.registrations
        #expect(phone.settings.isPushEnabled && registered == ["fcm-token-1"])
        // The first caregiver's session ends without signOut(); the second signs in on the same phone.
        let changed = Changed()
        withObservationTracking {
            _ = phone.settings.isPushEnabled
        } onChange: {
            changed.set()
        }
        phone.lifecycle.setMode(.caregiver(UUID()))
        #expect(changed.value && !phone.settings.isPushEnabled && phone.settings.isAvailable)
        #expect(phone.store.values[PushTokenLifecycle.StateKey.registeredToken] == nil)
        // Launch, a token callback and a re-check register nothing for them: push is theirs to turn on.
        await phone.lifecycle.applicationDidLaunch()
        await phone.lifecycle.tokenDidRefresh("fcm-token-2")
        #expect(await phone.settings.recheck() == .notApplicable)
        let registrations = await phone.api.registrations
        #expect(registrations == ["fcm-token-1"])
        // The first caregiver coming back does not get the state back either: it was forgotten, not set aside.
        phone.lifecycle.setMode(.caregiver(first))
        #expect(!phone.settings.isPushEnabled)
    }

    @Test("the same caregiver signing in again (a relaunch) keeps push on; patient mode keeps it but registers nothing")
    func sameCaregiverKeepsState() async {
        let phone = Phone()
        let caregiver = UUID()
        phone.lifecycle.setMode(.caregiver(caregiver))
        await phone.settings.setPushEnabled(true)
        phone.lifecycle.setMode(.patient)
        #expect(!phone.settings.isAvailable)
        await phone.lifecycle.tokenDidRefresh("fcm-token-2")
        let whilePatient = await phone.api.registrations
        #expect(whilePatient == ["fcm-token-1"])
        phone.lifecycle.setMode(.caregiver(caregiver))
        #expect(phone.settings.isPushEnabled && phone.settings.isAvailable)
        await phone.lifecycle.tokenDidRefresh("fcm-token-2")
        let afterwards = await phone.api.registrations
        #expect(afterwards == ["fcm-token-1", "fcm-token-2"])
    }

    @Test("sign-out forgets the state and whose it was, and leaves the kit signed out")
    func signOutSignsOut() async {
        let phone = Phone()
        phone.lifecycle.setMode(.caregiver(UUID()))
        await phone.settings.setPushEnabled(true)
        #expect(await phone.settings.signOut() == .unregistered)
        #expect(phone.lifecycle.mode == .signedOut && !phone.settings.isAvailable && phone.store.values.isEmpty)
        let last = await phone.api.calls.last
        #expect(last == .unregister(token: "fcm-token-1"))
    }
}

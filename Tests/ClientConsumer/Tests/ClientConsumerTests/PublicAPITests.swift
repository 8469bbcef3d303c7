import CaregiverPushClient
import Foundation
import Testing

// Written as the app's code would be: the conformances of docs/app-integration.md, with in-memory stand-ins for
// UNUserNotificationCenter, Firebase Messaging and UserDefaults.

@MainActor
final class AllowingPermission: NotificationPermission {
    func requestAuthorization() async throws -> Bool { true }
    func authorizationStatus() async -> CaregiverPushPermissionStatus { .allowed }
}

@MainActor
final class FixedToken: PushTokenSource {
    func currentToken() async throws -> String { "consumer-token" }
}

@MainActor
final class Defaults: PushStateStore {
    var values: [String: String] = [:]
    func string(forKey key: String) -> String? { values[key] }
    func set(_ value: String?, forKey key: String) { values[key] = value }
}

@MainActor
@Suite("CaregiverPushClient, imported as the app imports it")
struct PublicAPITests {
    @Test("a tapped DOSE_TAKEN push and a local reminder both route, through the public router, to the right patient")
    func routing() {
        let patient = "clx9f3k2a0000qz8h1b2c3d4e"
        let router = CaregiverPushDeepLinkRouter()
        router.route(
            userInfo: [
                DoseTakenPayload.Key.type: DoseTakenPayload.type, DoseTakenPayload.Key.date: "2026-02-11",
                DoseTakenPayload.Key.slot: Slot.noon.rawValue, DoseTakenPayload.Key.patientID: patient,
                "aps": ["sound": "default"],
            ],
            identifier: "ignored")
        #expect(
            router.takeNavigation(selectedPatientID: nil, linkedPatientIDs: [patient])
                == CaregiverPushNavigation(selectPatient: patient, dateKey: "2026-02-11", slot: .noon))
        router.route(userInfo: [:], identifier: "notif:2026-02-11:bedtime:2")
        #expect(router.pending?.slot == .bedtime)
        #expect(
            CaregiverPushDeepLink.target(remotePush: ["type": "DOSE_TAKEN", "date": "2026-02-31", "slot": "noon"])
                == nil)
        let presenter = CaregiverPushForegroundPresenter(
            router: router, strings: .preferred(appLocalizations: ["ja"], preferredLanguages: ["en-US"]))
        #expect(presenter.present(CaregiverPushForegroundDecision(userInfo: [:]), mode: .caregiver(UUID())) == .system)
        let text = CaregiverPushSettingsText(strings: CaregiverPushStrings(language: "ja"))
        #expect(text.sectionTitle == "見守りPush通知" && text.settingsTabTitle == "設定" && !text.dismissTitle.isEmpty)
    }

    @Test("the toggle, the lifecycle and the API client can be built and wired from outside the package")
    func wiring() async {
        let api = PushAPIClient(
            baseURL: URL(string: "http://127.0.0.1:9")!, budget: .init(total: 2, attemptTimeout: 1),
            refreshedAccessToken: { "refreshed-jwt" }
        ) { "caregiver-jwt" }
        let defaults = Defaults()
        let lifecycle = PushTokenLifecycle(
            api: api, environment: .dev, tokenSource: FixedToken(), store: defaults, installationStore: Defaults(),
            clock: SystemPushClock())
        let settings = CaregiverPushSettingsModel(lifecycle: lifecycle, permission: AllowingPermission())
        #expect(!settings.isAvailable && lifecycle.mode == .signedOut)
        lifecycle.setMode(.caregiver(UUID()))
        #expect(!settings.isPushEnabled && !settings.isUpdating && settings.errorState == nil && settings.isAvailable)
        #expect(lifecycle.environment == .dev && !lifecycle.installationId.isEmpty)
        // Nothing listens on the discard port: the toggle stays off and says why.
        await settings.setPushEnabled(true)
        #expect(!settings.isPushEnabled && settings.errorState == .retry)
        #expect(defaults.values[PushTokenLifecycle.StateKey.lastAttemptFailed] == "true")
        let error: PushAPIError = .unavailable(retryAfterSeconds: 5)
        #expect(error.errorState.action == .retry && PushTokenLifecycle.refreshInterval == 24 * 60 * 60)
        // The language pushes are worded in: the kit's own, or the app's choice; the words are the contract's.
        #expect(["ja", "en"].contains(lifecycle.language))
        let english = PushTokenLifecycle(
            api: api, environment: .dev, tokenSource: FixedToken(), store: Defaults(), language: "en")
        #expect(english.language == "en")
        #expect(
            CaregiverPushStrings(language: "en").doseTakenBody(displayName: "Ann", withinTime: false, recorder: .both)
                == DoseTakenText.text(.body, language: "en", displayName: "Ann"))
        #expect(await settings.recheck() == .notApplicable)
        #expect(await settings.signOut() == .nothingRegistered)
        _ = UserDefaultsPushStateStore(defaults: .standard)
    }
}

/// What the app's own unit tests write to test its view models without a server: a stand-in for the API behind the
/// kit's protocol.
actor AnsweringAPI: PushAPI {
    private(set) var registered: [String] = []

    func register(token: String, environment: PushEnvironment, installationId: String?) async throws(PushAPIError) {
        registered.append(token)
    }

    func unregister(token: String) async throws(PushAPIError) {}

    func deviceStatus(token: String, environment: PushEnvironment, installationId: String?)
        async throws(PushAPIError) -> CaregiverPushDeviceStatus?
    {
        CaregiverPushDeviceStatus(enabled: true, disabledReason: nil)
    }
}

@MainActor
@Suite("an app's own tests, with the API stood in")
struct AppViewModelTests {
    @Test("the kit's model over the app's stand-in API turns push on, with no server")
    func standIn() async {
        let api = AnsweringAPI()
        let lifecycle = PushTokenLifecycle(api: api, environment: .prod, tokenSource: FixedToken(), store: Defaults())
        lifecycle.setMode(.caregiver(UUID()))
        let settings = CaregiverPushSettingsModel(lifecycle: lifecycle, permission: AllowingPermission())
        await settings.setPushEnabled(true)
        let registered = await api.registered
        #expect(settings.isPushEnabled && registered == ["consumer-token"])
    }
}

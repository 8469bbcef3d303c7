import CaregiverPushClient
import Foundation
import Testing

/// The in-app banner and the edge case "app foregrounded when push arrives": what a push shows in the foreground, and that a tap
/// on the in-app banner routes exactly as a tap on the system notification.
@MainActor
@Suite("kit: foreground presentation")
struct ForegroundPresenterTests {
    nonisolated static let patient = "clx9f3k2a0000qz8h1b2c3d4e"
    nonisolated static let caregiver = CaregiverPushAppMode.caregiver(UUID())
    static let push: [AnyHashable: Any] = [
        "type": "DOSE_TAKEN", "patientId": patient, "date": "2026-02-11", "slot": "noon",
        "recordingGroupId": "",
        "aps": ["alert": ["title": "服薬記録", "body": "山田花子さんが薬を服用しました"], "sound": "default"],
    ]

    @Test("a DOSE_TAKEN push in caregiver mode → the in-app banner, iOS files it and plays the sound, no system banner")
    func caregiverBanner() throws {
        let presenter = CaregiverPushForegroundPresenter(
            router: CaregiverPushDeepLinkRouter(), strings: CaregiverPushStrings(language: "ja"))
        #expect(
            presenter.present(CaregiverPushForegroundDecision(userInfo: Self.push), mode: Self.caregiver) == [
                .list, .sound,
            ])
        let banner = try #require(presenter.banner)
        #expect(banner.title == "服薬記録" && banner.body == "山田花子さんが薬を服用しました")
        #expect(
            banner.target == CaregiverPushDeepLinkTarget(patientID: Self.patient, dateKey: "2026-02-11", slot: .noon))
        #expect(banner.accessibilityLabel == "通知、服薬記録、山田花子さんが薬を服用しました")
        #expect(banner.accessibilityHint == "ダブルタップすると、服薬の履歴を開きます。")
        let english = CaregiverPushForegroundPresenter(
            router: CaregiverPushDeepLinkRouter(), strings: CaregiverPushStrings(language: "en"))
        _ = english.present(CaregiverPushForegroundDecision(userInfo: Self.push), mode: Self.caregiver)
        #expect(english.banner?.accessibilityHint == "Double-tap to open the medication history.")
    }

    @Test("tapping the banner routes as a tap on the notification would, and dismisses it")
    func bannerTapRoutesLikeSystemTap() {
        let viaBanner = CaregiverPushDeepLinkRouter()
        let presenter = CaregiverPushForegroundPresenter(router: viaBanner)
        _ = presenter.present(CaregiverPushForegroundDecision(userInfo: Self.push), mode: Self.caregiver)
        #expect(presenter.tapBanner())
        #expect(presenter.banner == nil && !presenter.tapBanner())
        let viaSystem = CaregiverPushDeepLinkRouter()
        viaSystem.route(userInfo: Self.push, identifier: "fcm-request")
        #expect(viaBanner.pending != nil && viaBanner.pending == viaSystem.pending)
        #expect(
            viaBanner.takeNavigation(selectedPatientID: nil, linkedPatientIDs: [Self.patient])
                == CaregiverPushNavigation(selectPatient: Self.patient, dateKey: "2026-02-11", slot: .noon))
    }

    @Test("a dismissed banner routes nothing")
    func dismissed() {
        let router = CaregiverPushDeepLinkRouter()
        let presenter = CaregiverPushForegroundPresenter(router: router)
        _ = presenter.present(CaregiverPushForegroundDecision(userInfo: Self.push), mode: Self.caregiver)
        presenter.dismissBanner()
        #expect(!presenter.tapBanner() && router.pending == nil)
    }

    @Test("patient mode → nothing shown at all; signed out → nothing")
    func patientMode() {
        let presenter = CaregiverPushForegroundPresenter(router: CaregiverPushDeepLinkRouter())
        #expect(presenter.present(CaregiverPushForegroundDecision(userInfo: Self.push), mode: .patient) == [])
        #expect(presenter.present(CaregiverPushForegroundDecision(userInfo: Self.push), mode: .signedOut) == [])
        #expect(presenter.banner == nil)
    }

    @Test("another type, an unroutable push, a local reminder → iOS presents it as usual, no in-app banner")
    func notOurs() {
        let presenter = CaregiverPushForegroundPresenter(router: CaregiverPushDeepLinkRouter())
        var other = Self.push
        other["type"] = "OTHER"
        var broken = Self.push
        broken["date"] = "2026-02-30"
        for userInfo in [other, broken, ["aps": ["sound": "default"]] as [AnyHashable: Any]] {
            #expect(
                presenter.present(CaregiverPushForegroundDecision(userInfo: userInfo), mode: Self.caregiver) == .system)
        }
        #expect(presenter.banner == nil)
    }

    @Test("a push without an alert → the catalog's title")
    func noAlert() {
        var bare = Self.push
        bare["aps"] = ["content-available": 1]
        let presenter = CaregiverPushForegroundPresenter(
            router: CaregiverPushDeepLinkRouter(), strings: CaregiverPushStrings(language: "en"))
        _ = presenter.present(CaregiverPushForegroundDecision(userInfo: bare), mode: Self.caregiver)
        #expect(presenter.banner?.title == "Medication Record")
    }
}

/// The foreground path under Swift 6's isolation: the delegate gets `userInfo` off the main actor, reads it there
/// into a `Sendable` decision or target, and only that crosses to the main actor.
@Suite("kit: the notification delegate's path off the main actor")
struct DelegatePathTests {
    @Test("the decision and the tap's target are made off the main actor; the main actor applies them")
    func offMainActor() async throws {
        let push: [AnyHashable: Any] = [
            "type": "DOSE_TAKEN", "patientId": ForegroundPresenterTests.patient, "date": "2026-02-11",
            "slot": "noon", "aps": ["alert": ["title": "服薬記録", "body": "山田花子さんが薬を服用しました"]],
        ]
        // Nonisolated here, as iOS calls the delegate: neither call needs the main actor.
        let decision = CaregiverPushForegroundDecision(userInfo: push)
        let target = CaregiverPushDeepLink.target(userInfo: push, identifier: "fcm-request")
        let expected = try #require(
            CaregiverPushDeepLinkTarget(patientID: ForegroundPresenterTests.patient, dateKey: "2026-02-11", slot: .noon)
        )
        #expect(target == expected)
        #expect(decision.kind == .doseTaken(expected, title: "服薬記録", body: "山田花子さんが薬を服用しました"))
        #expect(decision.systemPresentation(mode: .patient) == [])
        let (shown, banner, pending) = await MainActor.run {
            let router = CaregiverPushDeepLinkRouter()
            let presenter = CaregiverPushForegroundPresenter(
                router: router, strings: CaregiverPushStrings(language: "ja"))
            let shown = presenter.present(decision, mode: ForegroundPresenterTests.caregiver)
            router.route(target)
            return (shown, presenter.banner?.target, router.pending)
        }
        #expect(shown == [.list, .sound] && banner == target && pending == target)
    }

    @Test("a local reminder and another type are left to iOS in any mode; nothing of ours outside caregiver mode")
    func kinds() {
        #expect(CaregiverPushForegroundDecision(userInfo: [:]).kind == .localReminder)
        #expect(CaregiverPushForegroundDecision(userInfo: ["type": "OTHER"]).kind == .otherPush)
        #expect(CaregiverPushForegroundDecision(userInfo: [:]).systemPresentation(mode: .signedOut) == .system)
        #expect(CaregiverPushForegroundDecision(userInfo: ["type": "OTHER"]).systemPresentation(mode: .patient) == [])
    }
}

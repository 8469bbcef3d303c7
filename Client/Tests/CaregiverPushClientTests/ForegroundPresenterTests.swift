import CaregiverPushClient
import Foundation
import Testing

/// The in-app banner and the edge case "app foregrounded when push arrives": what a push shows in the foreground, and that a tap
/// on the in-app banner routes exactly as a tap on the system notification.
@MainActor
@Suite("kit: foreground presentation")
struct ForegroundPresenterTests {
    static let patient = UUID()
    static let push: [AnyHashable: Any] = [
        "type": "DOSE_TAKEN", "patientId": patient.uuidString.lowercased(), "date": "2026-02-11", "slot": "noon",
        "recordingGroupId": "",
        "aps": ["alert": ["title": "服薬記録", "body": "山田花子さんが薬を服用しました"], "sound": "default"],
    ]

    @Test("a DOSE_TAKEN push in caregiver mode → the in-app banner, iOS files it and plays the sound, no system banner")
    func caregiverBanner() throws {
        let presenter = CaregiverPushForegroundPresenter(
            router: CaregiverPushDeepLinkRouter(), strings: CaregiverPushStrings(language: "ja"))
        #expect(presenter.willPresent(userInfo: Self.push, mode: .caregiver) == [.list, .sound])
        let banner = try #require(presenter.banner)
        #expect(banner.title == "服薬記録" && banner.body == "山田花子さんが薬を服用しました")
        #expect(
            banner.target == CaregiverPushDeepLinkTarget(patientID: Self.patient, dateKey: "2026-02-11", slot: .noon))
        #expect(banner.accessibilityLabel == "通知、服薬記録、山田花子さんが薬を服用しました")
        #expect(banner.accessibilityHint == "ダブルタップすると、服薬の履歴を開きます。")
        let english = CaregiverPushForegroundPresenter(
            router: CaregiverPushDeepLinkRouter(), strings: CaregiverPushStrings(language: "en"))
        _ = english.willPresent(userInfo: Self.push, mode: .caregiver)
        #expect(english.banner?.accessibilityHint == "Double-tap to open the medication history.")
    }

    @Test("tapping the banner routes as a tap on the notification would, and dismisses it")
    func bannerTapRoutesLikeSystemTap() {
        let viaBanner = CaregiverPushDeepLinkRouter()
        let presenter = CaregiverPushForegroundPresenter(router: viaBanner)
        _ = presenter.willPresent(userInfo: Self.push, mode: .caregiver)
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
        _ = presenter.willPresent(userInfo: Self.push, mode: .caregiver)
        presenter.dismissBanner()
        #expect(!presenter.tapBanner() && router.pending == nil)
    }

    @Test("patient mode → nothing shown at all; signed out → nothing")
    func patientMode() {
        let presenter = CaregiverPushForegroundPresenter(router: CaregiverPushDeepLinkRouter())
        #expect(presenter.willPresent(userInfo: Self.push, mode: .patient) == [])
        #expect(presenter.willPresent(userInfo: Self.push, mode: .signedOut) == [])
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
            #expect(presenter.willPresent(userInfo: userInfo, mode: .caregiver) == .system)
        }
        #expect(presenter.banner == nil)
    }

    @Test("a push without an alert → the catalog's title")
    func noAlert() {
        var bare = Self.push
        bare["aps"] = ["content-available": 1]
        let presenter = CaregiverPushForegroundPresenter(
            router: CaregiverPushDeepLinkRouter(), strings: CaregiverPushStrings(language: "en"))
        _ = presenter.willPresent(userInfo: bare, mode: .caregiver)
        #expect(presenter.banner?.title == "Medication Record")
    }
}

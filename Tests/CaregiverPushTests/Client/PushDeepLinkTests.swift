import CaregiverPushClient
import Foundation
import Testing

/// The seeds' T008 cases, verbatim, then what they leave out: malformed dates and values that are not strings.
@MainActor
@Suite("client: push deep links (T008)")
struct PushDeepLinkTests {
    @Test("T008 (1): DOSE_TAKEN, 2026-02-11, morning → History at 2026-02-11, morning")
    func morning() {
        let router = NotificationDeepLinkRouter()
        router.routeFromRemotePush(userInfo: ["type": "DOSE_TAKEN", "date": "2026-02-11", "slot": "morning"])
        #expect(router.target == NotificationDeepLinkTarget(dateKey: "2026-02-11", slot: .morning))
    }

    @Test("T008 (2): slot bedtime → target.slot = .bedtime")
    func bedtime() {
        let router = NotificationDeepLinkRouter()
        router.routeFromRemotePush(userInfo: ["type": "DOSE_TAKEN", "date": "2026-02-11", "slot": "bedtime"])
        #expect(router.target?.slot == .bedtime)
    }

    @Test("T008 (3): unknown type OTHER → no target")
    func unknownType() {
        let router = NotificationDeepLinkRouter()
        router.routeFromRemotePush(userInfo: ["type": "OTHER", "date": "2026-02-11", "slot": "morning"])
        #expect(router.target == nil)
    }

    @Test("T008 (4): no date → no target")
    func missingDate() {
        let router = NotificationDeepLinkRouter()
        router.routeFromRemotePush(userInfo: ["type": "DOSE_TAKEN", "slot": "morning"])
        #expect(router.target == nil)
    }

    @Test("T008 (5): no slot → no target")
    func missingSlot() {
        let router = NotificationDeepLinkRouter()
        router.routeFromRemotePush(userInfo: ["type": "DOSE_TAKEN", "date": "2026-02-11"])
        #expect(router.target == nil)
    }

    @Test("T008 (6): the local notification notif:2026-02-11:morning:1 still routes (backward compatible)")
    func localIdentifier() {
        let router = NotificationDeepLinkRouter()
        router.route(identifier: "notif:2026-02-11:morning:1")
        #expect(router.target == NotificationDeepLinkTarget(dateKey: "2026-02-11", slot: .morning))
    }

    @Test(
        "a date that is not a real YYYY-MM-DD → no target",
        arguments: [
            "2026-02-30", "2026-13-01", "2026-00-10", "2026-02-00", "2025-02-29", "2026-2-11", "26-02-11",
            "2026/02/11", "2026-02-11T00:00:00+09:00", "２０２６-02-11", "", "0000-01-01", "2026-02-1a",
        ])
    func malformedDate(date: String) {
        #expect(PushDeepLink.target(remotePush: ["type": "DOSE_TAKEN", "date": date, "slot": "morning"]) == nil)
        #expect(PushDeepLink.target(localIdentifier: "notif:\(date):morning:1") == nil)
    }

    @Test("leap days and month ends that exist are accepted", arguments: ["2024-02-29", "2000-02-29", "2026-12-31"])
    func validDates(date: String) {
        #expect(PushDeepLink.target(remotePush: ["type": "DOSE_TAKEN", "date": date, "slot": "noon"])?.dateKey == date)
    }

    @Test("a value that is not a string → no target, even when its text would be right")
    func nonStringValues() {
        let good: [String: Any] = ["type": "DOSE_TAKEN", "date": "2026-02-11", "slot": "evening"]
        #expect(
            PushDeepLink.target(remotePush: good) == NotificationDeepLinkTarget(dateKey: "2026-02-11", slot: .evening))
        let replacements: [(String, Any)] = [
            ("type", 1), ("type", ["DOSE_TAKEN"]), ("date", 20_260_211), ("date", Date()), ("slot", 0),
            ("slot", NSNull()), ("slot", ["morning"]), ("type", Optional<String>.none as Any),
            // Not strings, though they print exactly as the right string would.
            ("type", Substring("DOSE_TAKEN")), ("date", Substring("2026-02-11")), ("slot", Slot.evening),
        ]
        for (key, value) in replacements {
            var userInfo: [AnyHashable: Any] = good
            userInfo[key] = value
            #expect(PushDeepLink.target(remotePush: userInfo) == nil, "\(key) = \(value)")
        }
    }

    @Test(
        "an unknown slot, wrong case, or padding → no target",
        arguments: ["Morning", "MORNING", " morning", "night", ""])
    func unknownSlot(slot: String) {
        #expect(PushDeepLink.target(remotePush: ["type": "DOSE_TAKEN", "date": "2026-02-11", "slot": slot]) == nil)
    }

    @Test("extra keys iOS adds (aps, gcm.message_id) and the other data fields do not disturb routing")
    func extraKeys() {
        let userInfo: [AnyHashable: Any] = [
            "type": "DOSE_TAKEN", "date": "2026-02-11", "slot": "noon", "patientId": UUID().uuidString,
            "recordingGroupId": "", "aps": ["alert": ["title": "服薬記録"], "sound": "default"],
            "gcm.message_id": "1700000000000000", AnyHashable(42): "not a string key",
        ]
        #expect(
            PushDeepLink.target(remotePush: userInfo) == NotificationDeepLinkTarget(dateKey: "2026-02-11", slot: .noon))
    }

    @Test(
        "local identifiers that are not notif:{date}:{slot}:{n} → no target",
        arguments: [
            "notif:2026-02-11:morning", "notif:2026-02-11:morning:1:2", "notif:2026-02-11:morning:",
            "notif:2026-02-11:morning:x",
            "reminder:2026-02-11:morning:1", "notif:2026-02-11:lunch:1", "", "notif::morning:1",
        ])
    func malformedLocalIdentifier(identifier: String) {
        #expect(PushDeepLink.target(localIdentifier: identifier) == nil)
    }

    @Test("a tap: a userInfo with a type is read as a push only; without one, by its identifier (T031)")
    func tapOfEitherKind() {
        let router = NotificationDeepLinkRouter()
        router.route(userInfo: [:], identifier: "notif:2026-02-10:noon:3")
        #expect(router.target == NotificationDeepLinkTarget(dateKey: "2026-02-10", slot: .noon))
        router.clear()
        #expect(router.target == nil)
        // An unknown remote type does not fall back to the identifier, and leaves no target.
        router.route(userInfo: ["type": "OTHER"], identifier: "notif:2026-02-10:noon:3")
        #expect(router.target == nil)
        router.route(
            userInfo: ["type": "DOSE_TAKEN", "date": "2026-02-12", "slot": "bedtime"], identifier: "some-fcm-request-id"
        )
        #expect(router.target == NotificationDeepLinkTarget(dateKey: "2026-02-12", slot: .bedtime))
        // Something unroutable afterwards does not clear a target the UI has not consumed yet.
        router.routeFromRemotePush(userInfo: ["type": "OTHER"])
        #expect(router.target?.slot == .bedtime)
    }
}

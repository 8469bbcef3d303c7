import CaregiverPushClient
import Foundation
import Testing

/// The six routing cases, then what they leave out: malformed dates and values that are not strings.
@MainActor
@Suite("kit: push deep links")
struct PushDeepLinkTests {
    @Test("DOSE_TAKEN, 2026-02-11, morning → History at 2026-02-11, morning")
    func morning() {
        let router = CaregiverPushDeepLinkRouter()
        router.routeFromRemotePush(userInfo: ["type": "DOSE_TAKEN", "date": "2026-02-11", "slot": "morning"])
        #expect(router.pending == CaregiverPushDeepLinkTarget(dateKey: "2026-02-11", slot: .morning))
    }

    @Test("slot bedtime → target.slot = .bedtime")
    func bedtime() {
        let router = CaregiverPushDeepLinkRouter()
        router.routeFromRemotePush(userInfo: ["type": "DOSE_TAKEN", "date": "2026-02-11", "slot": "bedtime"])
        #expect(router.pending?.slot == .bedtime)
    }

    @Test("unknown type OTHER → no target")
    func unknownType() {
        let router = CaregiverPushDeepLinkRouter()
        router.routeFromRemotePush(userInfo: ["type": "OTHER", "date": "2026-02-11", "slot": "morning"])
        #expect(router.pending == nil)
    }

    @Test("no date → no target")
    func missingDate() {
        let router = CaregiverPushDeepLinkRouter()
        router.routeFromRemotePush(userInfo: ["type": "DOSE_TAKEN", "slot": "morning"])
        #expect(router.pending == nil)
    }

    @Test("no slot → no target")
    func missingSlot() {
        let router = CaregiverPushDeepLinkRouter()
        router.routeFromRemotePush(userInfo: ["type": "DOSE_TAKEN", "date": "2026-02-11"])
        #expect(router.pending == nil)
    }

    @Test("the local notification notif:2026-02-11:morning:1 still routes (backward compatible)")
    func localIdentifier() {
        let router = CaregiverPushDeepLinkRouter()
        router.route(userInfo: [:], identifier: "notif:2026-02-11:morning:1")
        #expect(router.pending == CaregiverPushDeepLinkTarget(dateKey: "2026-02-11", slot: .morning))
    }

    @Test(
        "a date that is not a real YYYY-MM-DD → no target",
        arguments: [
            "2026-02-30", "2026-13-01", "2026-00-10", "2026-02-00", "2025-02-29", "2026-2-11", "26-02-11",
            "2026/02/11", "2026-02-11T00:00:00+09:00", "２０２６-02-11", "", "0000-01-01", "2026-02-1a",
        ])
    func malformedDate(date: String) {
        #expect(
            CaregiverPushDeepLink.target(remotePush: ["type": "DOSE_TAKEN", "date": date, "slot": "morning"]) == nil)
        #expect(CaregiverPushDeepLink.target(localIdentifier: "notif:\(date):morning:1") == nil)
    }

    @Test("leap days and month ends that exist are accepted", arguments: ["2024-02-29", "2000-02-29", "2026-12-31"])
    func validDates(date: String) {
        #expect(
            CaregiverPushDeepLink.target(remotePush: ["type": "DOSE_TAKEN", "date": date, "slot": "noon"])?.dateKey
                == date)
    }

    @Test("a value that is not a string → no target, even when its text would be right")
    func nonStringValues() {
        let good: [String: Any] = ["type": "DOSE_TAKEN", "date": "2026-02-11", "slot": "evening"]
        #expect(
            CaregiverPushDeepLink.target(remotePush: good)
                == CaregiverPushDeepLinkTarget(dateKey: "2026-02-11", slot: .evening))
        let replacements: [(String, Any)] = [
            ("type", 1), ("type", ["DOSE_TAKEN"]), ("date", 20_260_211), ("date", Date()), ("slot", 0),
            ("slot", NSNull()), ("slot", ["morning"]), ("type", Optional<String>.none as Any),
            // Not strings, though they print exactly as the right string would.
            ("type", Substring("DOSE_TAKEN")), ("date", Substring("2026-02-11")), ("slot", Slot.evening),
        ]
        for (key, value) in replacements {
            var userInfo: [AnyHashable: Any] = good
            userInfo[key] = value
            #expect(CaregiverPushDeepLink.target(remotePush: userInfo) == nil, "\(key) = \(value)")
        }
    }

    @Test(
        "an unknown slot, wrong case, or padding → no target",
        arguments: ["Morning", "MORNING", " morning", "night", ""])
    func unknownSlot(slot: String) {
        #expect(
            CaregiverPushDeepLink.target(remotePush: ["type": "DOSE_TAKEN", "date": "2026-02-11", "slot": slot]) == nil)
    }

    @Test("extra keys iOS adds (aps, gcm.message_id) and the other data fields do not disturb routing")
    func extraKeys() {
        let patient = "patient-123"
        let userInfo: [AnyHashable: Any] = [
            "type": "DOSE_TAKEN", "date": "2026-02-11", "slot": "noon", "patientId": patient,
            "recordingGroupId": "", "aps": ["alert": ["title": "服薬記録"], "sound": "default"],
            "gcm.message_id": "1700000000000000", AnyHashable(42): "not a string key",
        ]
        #expect(
            CaregiverPushDeepLink.target(remotePush: userInfo)
                == CaregiverPushDeepLinkTarget(patientID: patient, dateKey: "2026-02-11", slot: .noon))
    }

    @Test(
        "local identifiers that are not notif:{date}:{slot}:{n} → no target",
        arguments: [
            "notif:2026-02-11:morning", "notif:2026-02-11:morning:1:2", "notif:2026-02-11:morning:",
            "notif:2026-02-11:morning:x",
            "reminder:2026-02-11:morning:1", "notif:2026-02-11:lunch:1", "", "notif::morning:1",
        ])
    func malformedLocalIdentifier(identifier: String) {
        #expect(CaregiverPushDeepLink.target(localIdentifier: identifier) == nil)
    }

    @Test("a tap: a userInfo with a type is read as a push only; without one, by its identifier")
    func tapOfEitherKind() {
        let router = CaregiverPushDeepLinkRouter()
        router.route(userInfo: [:], identifier: "notif:2026-02-10:noon:3")
        #expect(router.pending == CaregiverPushDeepLinkTarget(dateKey: "2026-02-10", slot: .noon))
        router.clear()
        #expect(router.pending == nil)
        // An unknown remote type does not fall back to the identifier, and leaves no target.
        router.route(userInfo: ["type": "OTHER"], identifier: "notif:2026-02-10:noon:3")
        #expect(router.pending == nil)
        router.route(
            userInfo: ["type": "DOSE_TAKEN", "date": "2026-02-12", "slot": "bedtime"], identifier: "some-fcm-request-id"
        )
        #expect(router.pending == CaregiverPushDeepLinkTarget(dateKey: "2026-02-12", slot: .bedtime))
        // Something unroutable afterwards does not clear a target the UI has not consumed yet.
        router.routeFromRemotePush(userInfo: ["type": "OTHER"])
        #expect(router.pending?.slot == .bedtime)
    }
}

/// The target carries the patient, and routing says which patient to select before opening date and slot.
@MainActor
@Suite("kit: deep links to the right patient")
struct PatientRoutingTests {
    static let first = "clx9f3k2a0000qz8h1b2c3d4e"
    static let second = "0f8fad5b-d9cb-469f-a165-70867728950e"

    static func push(patient: Any?, date: String = "2026-02-11", slot: String = "evening") -> [AnyHashable: Any] {
        var userInfo: [AnyHashable: Any] = ["type": "DOSE_TAKEN", "date": date, "slot": slot, "recordingGroupId": ""]
        if let patient { userInfo["patientId"] = patient }
        return userInfo
    }

    @Test(
        "the push's patientId is the target's patient, unchanged: a UUID, a cuid, the seeds' patient-123",
        arguments: [
            "0f8fad5b-d9cb-469f-a165-70867728950e", "clx9f3k2a0000qz8h1b2c3d4e", "patient-123",
            "0F8FAD5B-D9CB-469F-A165-70867728950E",
        ])
    func carriesPatient(patient: String) {
        let target = CaregiverPushDeepLink.target(remotePush: Self.push(patient: patient))
        #expect(target?.patientID == patient && target?.dateKey == "2026-02-11" && target?.slot == .evening)
    }

    @Test(
        "a patientId that is not an id → no target",
        arguments: ["", "not an id", "patient/123", "patient\n123", "é", String(repeating: "a", count: 101)])
    func malformedPatient(text: String) {
        #expect(CaregiverPushDeepLink.target(remotePush: Self.push(patient: text)) == nil)
        #expect(CaregiverPushDeepLink.target(remotePush: Self.push(patient: 42)) == nil)
    }

    @Test("another patient showing → select the push's patient first, then its date and slot")
    func selectsOtherPatient() {
        let router = CaregiverPushDeepLinkRouter()
        router.route(userInfo: Self.push(patient: Self.second), identifier: "x")
        #expect(
            router.takeNavigation(selectedPatientID: Self.first, linkedPatientIDs: [Self.first, Self.second])
                == CaregiverPushNavigation(selectPatient: Self.second, dateKey: "2026-02-11", slot: .evening))
        #expect(router.pending == nil)
        #expect(router.takeNavigation(selectedPatientID: Self.first, linkedPatientIDs: [Self.first]) == nil)
    }

    @Test("the push's patient already showing → no selection, straight to date and slot")
    func samePatient() {
        let router = CaregiverPushDeepLinkRouter()
        router.route(userInfo: Self.push(patient: Self.second), identifier: "x")
        #expect(
            router.takeNavigation(selectedPatientID: Self.second, linkedPatientIDs: [Self.first, Self.second])
                == CaregiverPushNavigation(selectPatient: nil, dateKey: "2026-02-11", slot: .evening))
    }

    @Test("a patient no longer linked → nothing opens, and the target is dropped")
    func unlinkedPatient() {
        let router = CaregiverPushDeepLinkRouter()
        router.route(userInfo: Self.push(patient: UUID().uuidString), identifier: "x")
        #expect(router.takeNavigation(selectedPatientID: Self.first, linkedPatientIDs: [Self.first]) == nil)
        #expect(router.pending == nil)
    }

    @Test("a local reminder and a push without patientId open the History of the patient showing")
    func noPatient() {
        let router = CaregiverPushDeepLinkRouter()
        router.route(userInfo: [:], identifier: "notif:2026-02-10:noon:3")
        #expect(
            router.takeNavigation(selectedPatientID: Self.first, linkedPatientIDs: [Self.first])
                == CaregiverPushNavigation(selectPatient: nil, dateKey: "2026-02-10", slot: .noon))
        router.routeFromRemotePush(userInfo: Self.push(patient: nil, slot: "morning"))
        #expect(router.takeNavigation(selectedPatientID: nil, linkedPatientIDs: [])?.slot == .morning)
    }

    @Test("a newer tap replaces an older one not yet opened; nothing pending → no navigation")
    func newerTapWins() {
        let router = CaregiverPushDeepLinkRouter()
        #expect(router.takeNavigation(selectedPatientID: nil, linkedPatientIDs: []) == nil)
        router.route(userInfo: Self.push(patient: Self.first, slot: "noon"), identifier: "x")
        router.route(userInfo: Self.push(patient: Self.second, slot: "bedtime"), identifier: "y")
        #expect(
            router.takeNavigation(selectedPatientID: nil, linkedPatientIDs: [Self.first, Self.second])
                == CaregiverPushNavigation(selectPatient: Self.second, dateKey: "2026-02-11", slot: .bedtime))
    }
}

/// A cold start from a push: the tap arrives before the caregiver's patients are loaded, and waits for them.
@MainActor
@Suite("kit: a cold start's tap waits for the patients")
struct ColdStartTests {
    static let patient = "patient-123"
    static let push: [AnyHashable: Any] = [
        "type": "DOSE_TAKEN", "patientId": patient, "date": "2026-02-11", "slot": "bedtime",
    ]

    @Test("before the patients are loaded the target waits; once they are, it navigates to the patient")
    func waitsForPatients() {
        let router = CaregiverPushDeepLinkRouter()
        router.route(userInfo: Self.push, identifier: "cold")
        // The home screen appears before the patient list has loaded: nothing yet, and nothing lost.
        #expect(router.takeNavigation(selectedPatientID: nil, linkedPatientIDs: nil) == nil)
        #expect(router.pending?.patientID == Self.patient && router.dropped == nil)
        #expect(
            router.takeNavigation(selectedPatientID: nil, linkedPatientIDs: ["another-patient", Self.patient])
                == CaregiverPushNavigation(selectPatient: Self.patient, dateKey: "2026-02-11", slot: .bedtime))
        #expect(router.pending == nil && router.dropped == nil)
    }

    @Test("a local reminder waits for the patients too, then opens the History of the patient showing")
    func reminderWaits() {
        let router = CaregiverPushDeepLinkRouter()
        router.route(userInfo: [:], identifier: "notif:2026-02-11:morning:1")
        #expect(router.takeNavigation(selectedPatientID: nil, linkedPatientIDs: nil) == nil && router.pending != nil)
        #expect(router.takeNavigation(selectedPatientID: nil, linkedPatientIDs: [])?.slot == .morning)
    }

    @Test("once loaded, a patient not among them drops the target, and the router says why")
    func droppedWithReason() throws {
        let router = CaregiverPushDeepLinkRouter()
        router.route(userInfo: Self.push, identifier: "cold")
        #expect(router.takeNavigation(selectedPatientID: nil, linkedPatientIDs: nil) == nil)
        #expect(router.takeNavigation(selectedPatientID: nil, linkedPatientIDs: ["another-patient"]) == nil)
        let dropped = try #require(router.dropped)
        #expect(dropped.reason == .patientNotLinked && dropped.target.patientID == Self.patient)
        #expect(router.pending == nil)
        // The next tap clears the note.
        router.route(userInfo: Self.push, identifier: "next")
        #expect(router.dropped == nil)
    }
}

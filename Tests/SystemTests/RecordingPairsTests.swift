import Codecs
import CaregiverPush
import Foundation
import Logging
import OpenSSLCrypto
import Testing
import TestFixtures
import TestSupport

/// Two recordings close together, through the built functions, PostgreSQL and the FCM fake, with the functions'
/// clock fixed (libfaketime, docs/development.md#fixed-instant) at each slot boundary, Tokyo midnight, UTC midnight
/// and the last minute of a month and of a year: what each caregiver's phone shows (docs/behaviour.md#event-key).
///
/// Every household is the patient 山田花子 with caregivers A and C, one phone each. A records one of the pair, the
/// patient the other, each with an explicit `takenAt` in one Tokyo minute.
@Suite("recording pairs: every recording its own true push, at fixed instants")
struct RecordingPairsTests {
    /// The Tokyo minute each pair is recorded in; the functions' clock starts 40 s into it.
    static let minutes = [
        "2026-02-11T04:00",  // bedtime → morning
        "2026-02-11T11:00",  // morning → noon
        "2026-02-11T16:00",  // noon → evening
        "2026-02-11T20:00",  // evening → bedtime
        "2026-02-12T00:00",  // Tokyo midnight (15:00 UTC)
        "2026-02-12T01:27",  // a PRN's slot (from takenAt) and a bedtime dose's (from scheduledAt) coincide
        "2026-02-12T09:00",  // UTC midnight
        "2026-01-31T23:59",  // the last minute of a month
        "2025-12-31T23:59",  // the last minute of a year
    ]

    static let name = "山田花子"
    static let withinTime = "山田花子さんが時間内に薬を服用しました！"
    static let plain = "山田花子さんが薬を服用しました"
    /// What a phone is told of a dose a caregiver (A) recorded.
    static let withinTimeByCaregiver = "山田花子さんの時間内の服薬を介護者が記録しました"
    static let plainByCaregiver = "山田花子さんの服薬を介護者が記録しました"

    /// A household recording at a fixed instant.
    struct Household {
        let patient: UUID
        let patientToken: String
        let a: (id: UUID, token: String, device: String)
        let cDevice: String
        /// medication id by its schedule time (`HH:mm`), and the PRN medication
        let scheduled: [String: [UUID]]
        let prn: UUID
        let fake: FCMFake
        let now: Date

        /// Records through the built function `function` at ``now``; as A when `byA`, else as the patient.
        func record(_ function: String, byA: Bool, _ body: [String: JSONValue]) throws -> JSONValue {
            var body = body
            if byA { body["patientId"] = .string(patient.uuidString.lowercased()) }
            let path =
                switch function {
                case "dose-record": "/api/dose-records"
                case "slot-bulk-record": "/api/dose-records/slot"
                default: "/api/prn-dose-records"
                }
            let event = makeEvent(path: path, bearer: byA ? a.token : patientToken, body: json(body))
            var environment = fake.environment()
            environment.merge(try FixedInstant.environment(at: now)) { _, fixed in fixed }
            let run = try Executables.run(function, input: event, environment: environment)
            try #require(run.response?.statusCode == 200, "\(function): \(run.response?.body ?? run.stderr)")
            return try #require(run.body)
        }

        /// What each phone shows: its pushes as `body | collapse id | date | slot`, sorted.
        func shown() throws -> (a: [String], c: [String]) {
            func lines(_ device: String) throws -> [String] {
                try fake.messages(to: [device]).map { request in
                    let message = request["message"]
                    return [
                        message?["notification"]?["body"]?.stringValue ?? "-",
                        message?["apns"]?["headers"]?["apns-collapse-id"]?.stringValue ?? "-",
                        message?["data"]?["date"]?.stringValue ?? "-", message?["data"]?["slot"]?.stringValue ?? "-",
                    ].joined(separator: " | ")
                }.sorted()
            }
            return (try lines(a.device), try lines(cDevice))
        }

        /// The fallback key of single scheduled doses of `date`/`slot` taken in Tokyo minute `hhmm`.
        func singleKey(_ date: String, _ slot: Slot, _ hhmm: String) -> String {
            "doseTaken:\(patient.uuidString.lowercased()):\(date):\(slot.rawValue):\(hhmm)"
        }
    }

    /// The line ``Household/shown()`` makes for a push of event `key`.
    static func push(_ body: String, key: String, _ date: String, _ slot: Slot) -> String {
        [body, SHA256.hexPrefix(of: key, length: 32), date, slot.rawValue].joined(separator: " | ")
    }

    /// A fresh household whose scheduled medications take the given times (`HH:mm`, several medications may share a
    /// time), its functions' clock at `now`.
    static func household(times: [String], now: Date) throws -> Household {
        let fake = try FCMFake()
        return try TestDatabase.with { connection in
            // The FCM access token as a warm deployment holds it, minted on the test's clock, which Google's (the
            // emulator's) agrees with: an assertion signed at a past instant would be refused as expired.
            let account = try #require(try ServiceAccount.load(from: fake.configuration()))
            _ = try AccessTokenProvider(account: account).accessToken(
                connection: connection, logger: Logger(label: "recording-pairs"))
            let patient = try Seed.patient(connection, displayName: name)
            let (a, c) = (UUID(), UUID())
            let (aDevice, cDevice) = (makeDeviceToken(), makeDeviceToken())
            for (caregiver, device) in [(a, aDevice), (c, cDevice)] {
                try Seed.link(connection, caregiver: caregiver, patient: patient)
                try Seed.registerDevice(device, caregiver: caregiver, connection: connection)
            }
            var scheduled: [String: [UUID]] = [:]
            for time in times {
                scheduled[time, default: []].append(try Seed.medication(connection, patient: patient, times: [time]))
            }
            // Valid a day past the chosen instant, whatever the test process's own clock says.
            let lifetime = now.timeIntervalSinceNow + 86_400
            return Household(
                patient: patient,
                patientToken: try Seed.session(connection, patient: patient, expiresIn: max(lifetime, 3600)),
                a: (a, try caregiverToken(a, issuedAt: now), aDevice), cDevice: cDevice, scheduled: scheduled,
                prn: try Seed.medication(connection, patient: patient, isPRN: true), fake: fake, now: now)
        }
    }

    /// `minute` (`YYYY-MM-DDTHH:mm`, Tokyo) plus `seconds`, as an RFC 3339 text and an instant.
    static func at(_ minute: String, _ seconds: Int) throws -> (text: String, date: Date) {
        let text = "\(minute):\(String(seconds).leftPadded(to: 2))+09:00"
        return (text, try #require(Timestamp.parseRFC3339(text)))
    }

    static func parts(_ minute: String) -> (date: String, hhmm: String) {
        (String(minute.prefix(10)), String(minute.suffix(5)))
    }

    /// The slot of a Tokyo `HH:mm`, written out here rather than asked of the code under test.
    static func slot(_ hhmm: String) -> Slot {
        switch Int(hhmm.prefix(2)) ?? 0 {
        case 4...10: .morning
        case 11...15: .noon
        case 16...19: .evening
        default: .bedtime
        }
    }

    @Test(
        "a PRN and a scheduled dose in one minute, by A and the patient: two events; A is told of the PRN only",
        arguments: minutes)
    func prnBesideScheduledDose(minute: String) throws {
        let (date, hhmm) = Self.parts(minute)
        let home = try Self.household(times: [hhmm], now: try Self.at(minute, 40).date)
        let scheduledAt = try Self.at(minute, 0).text
        let dose = try home.record(
            "dose-record", byA: true,
            [
                "medicationId": .string(try #require(home.scheduled[hhmm]?.first).uuidString.lowercased()),
                "scheduledAt": .string(scheduledAt), "takenAt": .string(try Self.at(minute, 10).text),
            ])
        let prn = try home.record(
            "prn-record", byA: false,
            [
                "medicationId": .string(home.prn.uuidString.lowercased()),
                "takenAt": .string(try Self.at(minute, 20).text),
            ])
        #expect(dose["updatedCount"] == .number(1) && prn["updatedCount"] == .number(1))
        let slot = Self.slot(hhmm)
        #expect(dose["record"]?["date"] == .string(date) && prn["record"]?["date"] == .string(date))
        #expect(dose["record"]?["slot"] == .string(slot.rawValue) && prn["record"]?["slot"] == .string(slot.rawValue))
        let prnKey = "doseTaken:prn:\(try #require(prn["record"]?["id"]?.stringValue))"
        let doseKey = home.singleKey(date, slot, hhmm)
        let shown = try home.shown()
        #expect(shown.a == [Self.push(Self.plain, key: prnKey, date, slot)])
        #expect(
            shown.c
                == [
                    Self.push(Self.plain, key: prnKey, date, slot),
                    Self.push(Self.withinTimeByCaregiver, key: doseKey, date, slot),
                ].sorted())
    }

    @Test(
        "two doses of one slot in one minute, by A then the patient: one event; C's text corrected under its collapse id",
        arguments: minutes)
    func twoDosesOfOneSlot(minute: String) throws {
        let (date, hhmm) = Self.parts(minute)
        let home = try Self.household(times: [hhmm, hhmm], now: try Self.at(minute, 40).date)
        let medications = try #require(home.scheduled[hhmm])
        for (index, byA) in [true, false].enumerated() {
            let body = try home.record(
                "dose-record", byA: byA,
                [
                    "medicationId": .string(medications[index].uuidString.lowercased()),
                    "scheduledAt": .string(try Self.at(minute, 0).text),
                    "takenAt": .string(try Self.at(minute, 10 + 10 * index).text),
                ])
            #expect(body["updatedCount"] == .number(1) && body["record"]?["withinTime"] == .bool(true))
        }
        let slot = Self.slot(hhmm)
        let key = home.singleKey(date, slot, hhmm)
        let shown = try home.shown()
        // A is told of the patient's dose (theirs is not news to them). C was told of A's before the patient's
        // existed, "recorded by a caregiver", no longer true of the event: C is told again, the phone shows one.
        #expect(shown.a == [Self.push(Self.withinTime, key: key, date, slot)])
        #expect(
            shown.c
                == [
                    Self.push(Self.withinTime, key: key, date, slot),
                    Self.push(Self.withinTimeByCaregiver, key: key, date, slot),
                ].sorted())
    }

    @Test(
        "a within-time dose by A and a late one by the patient in one minute: both phones end on the plain text")
    func mergedWithinTimeIsAnded() throws {
        let minute = "2026-02-11T06:30"
        let home = try Self.household(times: ["06:00", "04:00"], now: try Self.at(minute, 40).date)
        let first = try home.record(
            "dose-record", byA: true,
            [
                "medicationId": .string(try #require(home.scheduled["06:00"]?.first).uuidString.lowercased()),
                "scheduledAt": .string("2026-02-11T06:00:00+09:00"), "takenAt": .string(try Self.at(minute, 10).text),
            ])
        let late = try home.record(
            "dose-record", byA: false,
            [
                "medicationId": .string(try #require(home.scheduled["04:00"]?.first).uuidString.lowercased()),
                "scheduledAt": .string("2026-02-11T04:00:00+09:00"), "takenAt": .string(try Self.at(minute, 20).text),
            ])
        #expect(first["record"]?["withinTime"] == .bool(true) && late["record"]?["withinTime"] == .bool(false))
        let key = home.singleKey("2026-02-11", .morning, "06:30")
        let shown = try home.shown()
        // C had its push, about A's within-time dose, before the late one existed, and is told the truth after it;
        // A's is about the late one.
        #expect(shown.a == [Self.push(Self.plain, key: key, "2026-02-11", .morning)])
        #expect(
            shown.c
                == [
                    Self.push(Self.plain, key: key, "2026-02-11", .morning),
                    Self.push(Self.withinTimeByCaregiver, key: key, "2026-02-11", .morning),
                ].sorted())
        let stored = try TestDatabase.with { connection in
            try connection.query(
                "SELECT event_key, within_time FROM push_events WHERE patient_id = \(home.patient)"
            ).map { try $0.decode((String, Bool).self) }
        }
        #expect(stored.count == 1 && stored.first?.0 == key && stored.first?.1 == false)
    }

    @Test(
        "a slot recording and a single dose of that slot in one minute: two events; A is told of the slot only",
        arguments: minutes)
    func slotBesideSingleDose(minute: String) throws {
        let (date, hhmm) = Self.parts(minute)
        let home = try Self.household(times: [hhmm, hhmm, hhmm], now: try Self.at(minute, 40).date)
        let medications = try #require(home.scheduled[hhmm])
        let slot = Self.slot(hhmm)
        let single = try home.record(
            "dose-record", byA: true,
            [
                "medicationId": .string(medications[0].uuidString.lowercased()),
                "scheduledAt": .string(try Self.at(minute, 0).text), "takenAt": .string(try Self.at(minute, 10).text),
            ])
        let group = try home.record(
            "slot-bulk-record", byA: false,
            ["date": .string(date), "slot": .string(slot.rawValue), "takenAt": .string(try Self.at(minute, 20).text)])
        #expect(single["updatedCount"] == .number(1) && group["updatedCount"] == .number(2))
        let groupKey = "doseTaken:\(try #require(group["recordingGroupId"]?.stringValue))"
        let shown = try home.shown()
        #expect(shown.a == [Self.push(Self.withinTime, key: groupKey, date, slot)])
        #expect(
            shown.c
                == [
                    Self.push(Self.withinTime, key: groupKey, date, slot),
                    Self.push(Self.withinTimeByCaregiver, key: home.singleKey(date, slot, hhmm), date, slot),
                ].sorted())
    }

    @Test(
        "recordings at 23:59:30 and 00:00:10 Tokyo are two days' pushes",
        arguments: [
            ("2026-02-10", "2026-02-11"), ("2026-01-31", "2026-02-01"), ("2025-12-31", "2026-01-01"),
        ])
    func acrossTokyoMidnight(day: String, next: String) throws {
        let home = try Self.household(times: ["23:30", "00:00"], now: try Self.at("\(next)T00:00", 40).date)
        let (before, after) = (try Self.at("\(day)T23:59", 30).text, try Self.at("\(next)T00:00", 10).text)
        let patientDose = try home.record(
            "dose-record", byA: false,
            [
                "medicationId": .string(try #require(home.scheduled["23:30"]?.first).uuidString.lowercased()),
                "scheduledAt": .string("\(day)T23:30:00+09:00"), "takenAt": .string(before),
            ])
        let aDose = try home.record(
            "dose-record", byA: true,
            [
                "medicationId": .string(try #require(home.scheduled["00:00"]?.first).uuidString.lowercased()),
                "scheduledAt": .string("\(next)T00:00:00+09:00"), "takenAt": .string(after),
            ])
        let patientPRN = try home.record(
            "prn-record", byA: false,
            ["medicationId": .string(home.prn.uuidString.lowercased()), "takenAt": .string(before)])
        let aPRN = try home.record(
            "prn-record", byA: true,
            ["medicationId": .string(home.prn.uuidString.lowercased()), "takenAt": .string(after)])
        #expect(patientDose["record"]?["date"] == .string(day) && aDose["record"]?["date"] == .string(next))
        #expect(patientPRN["record"]?["date"] == .string(day) && aPRN["record"]?["date"] == .string(next))
        let prnKey = { (body: JSONValue) in "doseTaken:prn:\(body["record"]?["id"]?.stringValue ?? "")" }
        let shown = try home.shown()
        // A: the patient's two recordings, never its own.
        #expect(
            shown.a
                == [
                    Self.push(Self.withinTime, key: home.singleKey(day, .bedtime, "23:59"), day, .bedtime),
                    Self.push(Self.plain, key: prnKey(patientPRN), day, .bedtime),
                ].sorted())
        #expect(
            shown.c
                == [
                    Self.push(Self.withinTime, key: home.singleKey(day, .bedtime, "23:59"), day, .bedtime),
                    Self.push(Self.withinTimeByCaregiver, key: home.singleKey(next, .bedtime, "00:00"), next, .bedtime),
                    Self.push(Self.plain, key: prnKey(patientPRN), day, .bedtime),
                    Self.push(Self.plainByCaregiver, key: prnKey(aPRN), next, .bedtime),
                ].sorted())
    }

    @Test("the functions run at the fixed instant: a PRN without takenAt is taken then, in that Tokyo day and slot")
    func functionsHonourTheInstant() throws {
        let now = try Self.at("2025-12-31T23:59", 40)
        let home = try Self.household(times: [], now: now.date)
        let body = try home.record(
            "prn-record", byA: false, ["medicationId": .string(home.prn.uuidString.lowercased())])
        let takenAt = try #require(body["record"]?["takenAt"]?.stringValue.flatMap(Timestamp.parseRFC3339))
        // The clock starts at the instant when the process starts, and runs on.
        #expect(takenAt >= now.date && takenAt < now.date.addingTimeInterval(20))
        #expect(body["record"]?["date"] == .string("2025-12-31") && body["record"]?["slot"] == .string("bedtime"))
    }
}

import Codecs
import CaregiverPush
import Foundation
import Logging
import OpenSSLCrypto
import Testing
import TestFixtures
import TestSupport

/// What each phone is told (docs/behaviour.md#payload, #on-time, #language, #prn-retry), read from the FCM
/// emulator's log: one household whose caregivers' phones differ in language (ja, en) and identity (token, FID),
/// recordings through the built functions at fixed instants (libfaketime), and the texts each phone received.
///
/// The household: the patient 山田花子; caregivers A and B, each with two phones, `ja · token`, `en · fid` (A) and
/// `en · token`, `ja · fid` (B); caregiver D, linked, with no phone, who records for the patient when a caregiver
/// does (D is never told of their own recordings, and has nothing to be told on). The matrix is written to
/// `.build/what-each-phone-is-told.md`.
@Suite("what each phone is told: one true text per reader, in the reader's language")
struct WhatEachPhoneIsToldTests {
    static let date = "2026-02-11"

    /// One phone of the household.
    struct Phone {
        let label: String
        let caregiver: UUID
        let identity: String
        let isFID: Bool
        let language: String
    }

    struct Household {
        let patient: UUID
        let patientToken: String
        let d: UUID
        var phones: [Phone]
        /// medication id by its schedule time (`HH:mm`)
        let scheduled: [String: UUID]
        let prn: UUID
        let fake: FCMFake

        /// Records through the built `function` with its clock started at Tokyo `hhmmss` of ``date``; as D when
        /// `byCaregiver`, else as the patient.
        @discardableResult
        func record(
            _ function: String, at hhmmss: String, byCaregiver: Bool, _ body: [String: JSONValue],
            idempotencyKey: String? = nil
        ) throws -> JSONValue {
            let now = try WhatEachPhoneIsToldTests.instant(hhmmss)
            var body = body
            if byCaregiver { body["patientId"] = .string(patient.uuidString.lowercased()) }
            let path =
                switch function {
                case "dose-record": "/api/dose-records"
                case "slot-bulk-record": "/api/dose-records/slot"
                default: "/api/prn-dose-records"
                }
            var headers: [String: String] = [:]
            if let idempotencyKey { headers["idempotency-key"] = idempotencyKey }
            let event = makeEvent(
                path: path, bearer: byCaregiver ? try caregiverToken(d, issuedAt: now) : patientToken,
                body: json(body), extraHeaders: headers)
            var environment = fake.environment()
            environment.merge(try FixedInstant.environment(at: now)) { _, fixed in fixed }
            let run = try Executables.run(function, input: event, environment: environment)
            try #require(run.response?.statusCode == 200, "\(function): \(run.response?.body ?? run.stderr)")
            return try #require(run.body)
        }

        /// The messages `phone` received, oldest first.
        func received(_ phone: Phone) throws -> [JSONValue] {
            try fake.messages(to: [phone.identity]).compactMap { $0["message"] }
        }

        /// Registers a phone through push-register, as the kit does.
        mutating func register(_ label: String, caregiver: UUID, isFID: Bool, language: String) throws {
            let identity = isFID ? FIDRegistrationTests.makeFID() : makeDeviceToken()
            let body: [String: JSONValue] = [
                isFID ? "fid" : "token": .string(identity), "platform": .string("ios"),
                "environment": .string("DEV"), "language": .string(language),
            ]
            let answer = invoke(
                PushRegister(),
                event: makeEvent(path: "/api/push/register", bearer: try caregiverToken(caregiver), body: json(body)))
            try #require(answer.status == 200, "\(answer.response.body)")
            phones.append(
                Phone(label: label, caregiver: caregiver, identity: identity, isFID: isFID, language: language))
        }
    }

    /// Tokyo `hhmmss` of ``date`` as an instant.
    static func instant(_ hhmmss: String) throws -> Date {
        try #require(Timestamp.parseRFC3339("\(date)T\(hhmmss)+09:00"))
    }

    static func text(_ hhmmss: String) -> String { "\(date)T\(hhmmss)+09:00" }

    /// A fresh household: the medications scheduled at `times`, a PRN one, and the four phones.
    static func household(times: [String]) throws -> Household {
        let fake = try FCMFake()
        var household = try TestDatabase.with { connection in
            // The FCM access token as a warm deployment holds it (an assertion signed at a fixed past instant would
            // be refused as expired by Google, and by the emulator).
            let account = try #require(try ServiceAccount.load(from: fake.configuration()))
            _ = try AccessTokenProvider(account: account).accessToken(
                connection: connection, logger: Logger(label: "what-each-phone-is-told"))
            let patient = try Seed.patient(connection, displayName: "山田花子")
            let (a, b, d) = (UUID(), UUID(), UUID())
            for caregiver in [a, b, d] { try Seed.link(connection, caregiver: caregiver, patient: patient) }
            var scheduled: [String: UUID] = [:]
            for time in times { scheduled[time] = try Seed.medication(connection, patient: patient, times: [time]) }
            return Household(
                patient: patient, patientToken: try Seed.session(connection, patient: patient, expiresIn: 3600), d: d,
                phones: [Phone(label: "", caregiver: a, identity: "", isFID: false, language: "")]
                    + [Phone(label: "", caregiver: b, identity: "", isFID: false, language: "")],
                scheduled: scheduled, prn: try Seed.medication(connection, patient: patient, isPRN: true), fake: fake)
        }
        let (a, b) = (household.phones[0].caregiver, household.phones[1].caregiver)
        household.phones = []
        try household.register("A · ja · token", caregiver: a, isFID: false, language: "ja-JP")
        try household.register("A · en · fid", caregiver: a, isFID: true, language: "en-US")
        try household.register("B · en · token", caregiver: b, isFID: false, language: "en")
        try household.register("B · ja · fid", caregiver: b, isFID: true, language: "ja")
        return household
    }

    /// The words each language's phone must show, written out here rather than asked of the code under test.
    static let words: [String: [String: String]] = [
        "ja": [
            "onTime": "山田花子さんが時間内に薬を服用しました！",
            "plain": "山田花子さんが薬を服用しました",
            "byCaregiver": "山田花子さんの服薬を介護者が記録しました",
            "onTimeByCaregiver": "山田花子さんの時間内の服薬を介護者が記録しました",
            "title": "服薬記録",
        ],
        "en": [
            "onTime": "山田花子 took their medication on time!",
            "plain": "山田花子 took their medication",
            "byCaregiver": "A caregiver recorded 山田花子's medication as taken",
            "onTimeByCaregiver": "A caregiver recorded 山田花子's medication as taken on time",
            "title": "Medication Record",
        ],
    ]

    static func language(_ phone: Phone) -> String { String(phone.language.prefix(2)) }

    @Test(
        "a single, a slot of mixed doses, two singles either side of the send, a PRN retried without and with its key"
    )
    func matrix() throws {
        let home = try Self.household(times: ["07:00", "08:00", "08:30", "11:00", "12:00"])
        var rows: [(scenario: String, events: Int)] = []
        var seen = 0
        func newMessages(_ scenario: String) throws -> [String: [JSONValue]] {
            var result: [String: [JSONValue]] = [:]
            for phone in home.phones {
                result[phone.label] = Array(try home.received(phone).dropFirst(seen))
            }
            return result
        }
        var table: [(scenario: String, cells: [String: [JSONValue]])] = []
        func advance(_ scenario: String) throws {
            let messages = try newMessages(scenario)
            table.append((scenario, messages))
            seen += messages.values.first?.count ?? 0
            // Every phone got as many messages as every other in each scenario.
            #expect(Set(messages.values.map(\.count)).count == 1, "\(scenario): \(messages.mapValues(\.count))")
        }
        func medication(_ hhmm: String) throws -> JSONValue {
            .string(try #require(home.scheduled[hhmm]).uuidString.lowercased())
        }

        // 1. A single dose, on time (08:00 taken at 08:05), recorded by the patient.
        try home.record(
            "dose-record", at: "08:05:10", byCaregiver: false,
            [
                "medicationId": try medication("08:00"), "scheduledAt": .string(Self.text("08:00:00")),
                "takenAt": .string(Self.text("08:05:10")),
            ])
        try advance("a single, on time, by the patient")
        // 2. The morning slot at 09:15 by caregiver D: 07:00 (late) and 08:30 (on time) — mixed, so not on time.
        let slot = try home.record(
            "slot-bulk-record", at: "09:15:10", byCaregiver: true,
            ["date": .string(Self.date), "slot": .string("morning"), "takenAt": .string(Self.text("09:15:10"))])
        #expect(slot["updatedCount"] == .number(2))
        let withinTimes = slot["records"]?.arrayValue?.compactMap { $0["withinTime"]?.boolValue } ?? []
        #expect(withinTimes.sorted { !$0 && $1 } == [false, true])
        try advance("a slot of mixed doses, by a caregiver")
        // 3. Two single doses of the noon slot in one Tokyo minute: 12:00 on time by the patient (sent before the
        //    second exists), then 11:00 late by D.
        try home.record(
            "dose-record", at: "12:30:10", byCaregiver: false,
            [
                "medicationId": try medication("12:00"), "scheduledAt": .string(Self.text("12:00:00")),
                "takenAt": .string(Self.text("12:30:10")),
            ])
        try home.record(
            "dose-record", at: "12:30:20", byCaregiver: true,
            [
                "medicationId": try medication("11:00"), "scheduledAt": .string(Self.text("11:00:00")),
                "takenAt": .string(Self.text("12:30:20")),
            ])
        try advance("two singles in one minute, either side of the send")
        // 4. A PRN sent twice without its key (a network retry), then one sent twice with its key.
        let prn: [String: JSONValue] = ["medicationId": .string(home.prn.uuidString.lowercased())]
        let keyless = try [
            home.record("prn-record", at: "13:00:10", byCaregiver: false, prn),
            home.record("prn-record", at: "13:00:10", byCaregiver: false, prn),
        ]
        #expect(keyless.map { $0["updatedCount"] } == [.number(1), .number(0)])
        #expect(keyless[0]["record"]?["id"] == keyless[1]["record"]?["id"])
        try advance("a PRN retried without its key")
        let key = UUID().uuidString.lowercased()
        let keyed = try [
            home.record("prn-record", at: "13:05:10", byCaregiver: false, prn, idempotencyKey: key),
            home.record("prn-record", at: "13:05:40", byCaregiver: false, prn, idempotencyKey: key),
        ]
        #expect(keyed.map { $0["updatedCount"] } == [.number(1), .number(0)])
        try advance("a PRN retried with its key")
        rows = table.map { ($0.scenario, $0.cells.values.first?.count ?? 0) }

        // What each phone shows, scenario by scenario, in its own language.
        for phone in home.phones {
            let words = try #require(Self.words[Self.language(phone)])
            let expected: [[String]] = [
                [words["onTime"]!], [words["byCaregiver"]!], [words["onTime"]!, words["plain"]!], [words["plain"]!],
                [words["plain"]!],
            ]
            let recorders = [["patient"], ["caregiver"], ["patient", "both"], ["patient"], ["patient"]]
            for (index, row) in table.enumerated() {
                let messages = row.cells[phone.label] ?? []
                #expect(
                    messages.map { $0["notification"]?["body"]?.stringValue ?? "-" } == expected[index],
                    "\(phone.label), \(row.scenario)")
                #expect(messages.allSatisfy { $0["notification"]?["title"]?.stringValue == words["title"] })
                #expect(
                    messages.map { $0["data"]?["recordedBy"]?.stringValue ?? "-" } == recorders[index],
                    "\(phone.label), \(row.scenario)")
                // Named by its own kind of identity, never by both.
                #expect(
                    messages.allSatisfy {
                        phone.isFID
                            ? $0["fid"]?.stringValue == phone.identity && $0["token"] == nil
                            : $0["token"]?.stringValue == phone.identity && $0["fid"] == nil
                    })
                // A correction replaces what it corrects: one collapse id per scenario.
                #expect(
                    Set(messages.map { $0["apns"]?["headers"]?["apns-collapse-id"]?.stringValue ?? "-" }).count == 1)
            }
        }
        #expect(rows.map(\.events) == [1, 1, 2, 1, 1])
        try Self.writeMatrix(table, phones: home.phones)
    }

    @Test("a phone registered between two singles of one minute gets one push, worded for both doses")
    func lateJoiningPhone() throws {
        var home = try Self.household(times: ["11:00", "12:00"])
        try home.record(
            "dose-record", at: "12:30:10", byCaregiver: false,
            [
                "medicationId": .string(try #require(home.scheduled["12:00"]).uuidString.lowercased()),
                "scheduledAt": .string(Self.text("12:00:00")), "takenAt": .string(Self.text("12:30:10")),
            ])
        try home.register("B · en · token, late", caregiver: home.phones[2].caregiver, isFID: false, language: "en")
        try home.record(
            "dose-record", at: "12:30:40", byCaregiver: false,
            [
                "medicationId": .string(try #require(home.scheduled["11:00"]).uuidString.lowercased()),
                "scheduledAt": .string(Self.text("11:00:00")), "takenAt": .string(Self.text("12:30:40")),
            ])
        let late = try home.received(try #require(home.phones.last))
        #expect(late.map { $0["notification"]?["body"]?.stringValue } == ["山田花子 took their medication"])
        // The phones that had the first text were told the truth after it; the late one only the truth.
        for phone in home.phones.dropLast() {
            let words = try #require(Self.words[Self.language(phone)])
            #expect(
                try home.received(phone).map { $0["notification"]?["body"]?.stringValue ?? "-" }
                    == [words["onTime"]!, words["plain"]!], "\(phone.label)")
        }
    }

    /// The matrix as Markdown, for the record (docs/behaviour.md#payload points at the test, not at a copy).
    static func writeMatrix(_ table: [(scenario: String, cells: [String: [JSONValue]])], phones: [Phone]) throws {
        var lines = [
            "| recording | " + phones.map(\.label).joined(separator: " | ") + " |",
            "|---|" + String(repeating: "---|", count: phones.count),
        ]
        for row in table {
            let cells = phones.map { phone in
                (row.cells[phone.label] ?? []).map {
                    "\($0["notification"]?["body"]?.stringValue ?? "-") (\($0["data"]?["recordedBy"]?.stringValue ?? "-"))"
                }.joined(separator: " → ")
            }
            lines.append("| \(row.scenario) | " + cells.joined(separator: " | ") + " |")
        }
        let url = Repository.root.appendingPathComponent(".build/what-each-phone-is-told.md")
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: url)
    }
}

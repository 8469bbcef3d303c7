import Codecs
import CaregiverPush
import Foundation
import Synchronization
import Testing
import TestFixtures
import TestSupport

/// A recorded dose and its push, end to end (docs/behaviour.md#push): fixture events through the built recording functions, the push through
/// the FCM fake, the database checked afterwards.
@Suite("recording functions and their push, end to end")
struct RecordingPushTests {
    static func run(
        _ function: String, fixture: String, _ values: [String: String], fake: FCMFake
    ) throws -> Executables.Run {
        try Executables.run(
            function, input: try Executables.fixture(fixture, values), environment: fake.environment())
    }

    @Test("a single TAKEN dose: one push per device of the linked caregiver")
    func singleDose() throws {
        let fake = try FCMFake()
        let household = try RecordingHousehold.make()
        let run = try Self.run("dose-record", fixture: "dose-record/patient.json", household.values(), fake: fake)
        #expect(run.response?.statusCode == 200)
        #expect(run.body?["updatedCount"] == .number(1))
        let messages = try fake.messages(to: household.allTokens)
        #expect(messages.count == 2 && Set(messages.compactMap { $0["token"]?.stringValue }) == household.allTokens)
        #expect(messages.allSatisfy { $0["message"]?["data"]?["recordingGroupId"] == .string("") })
        #expect(messages.allSatisfy { $0["message"]?["data"]?["slot"] == .string("morning") })
        // Nothing of the medication leaves: not in the messages, not in the function's log.
        let everything = try fake.requests().map { String(describing: $0) }.joined()
        #expect(!everything.contains("秘密") && !run.stderr.contains("秘密"))
    }

    @Test("updatedCount 0 sends no push")
    func repeatSendsNothing() throws {
        let fake = try FCMFake()
        let household = try RecordingHousehold.make()
        let values = household.values()
        _ = try Self.run("dose-record", fixture: "dose-record/patient.json", values, fake: fake)
        let again = try Self.run("dose-record", fixture: "dose-record/patient.json", values, fake: fake)
        #expect(again.body?["updatedCount"] == .number(0))
        #expect(try fake.requests().count == 2)
    }

    /// The info lines of a run: its stderr without the EMF metrics line.
    static func infoLines(_ run: Executables.Run) throws -> [JSONValue] {
        try run.stderr.split(separator: "\n").filter { !EMF.isEMF($0) }.map { try JSONValue.parse(String($0)) }
            .filter { $0["level"] == .string("info") }
    }

    @Test("a recording writes one info line as it answers: what it did, its record and the status")
    func oneLinePerRecording() throws {
        let fake = try FCMFake()
        let household = try RecordingHousehold.make()
        let values = household.values()
        let first = try Self.run("dose-record", fixture: "dose-record/patient.json", values, fake: fake)
        let again = try Self.run("dose-record", fixture: "dose-record/patient.json", values, fake: fake)
        for (run, updated) in [(first, 1), (again, 0)] {
            // The sender's own line when a process mints FCM's access token (once per token) is not the answer's.
            let lines = try Self.infoLines(run).filter { $0["msg"] != .string("fcm access token minted") }
            #expect(lines.count == 1, "\(lines)")
            #expect(lines.first?["msg"] == .string("dose recorded"))
            #expect(lines.first?["http.status"] == .number(200))
            #expect(lines.first?["dose.updated"] == .number(Double(updated)))
            #expect(lines.first?["dose.record"] == run.body?["record"]?["id"])
        }
    }

    @Test("a slot of three medications: one push per device carrying the group id; a repeat sends nothing")
    func bulkSlot() throws {
        let fake = try FCMFake()
        let household = try RecordingHousehold.make()
        let values = household.values()
        let run = try Self.run("slot-bulk-record", fixture: "slot-bulk-record/patient.json", values, fake: fake)
        #expect(run.body?["updatedCount"] == .number(3))
        let group = try #require(run.body?["recordingGroupId"]?.stringValue)
        let messages = try fake.messages(to: household.allTokens)
        #expect(messages.count == 2)
        #expect(messages.allSatisfy { $0["message"]?["data"]?["recordingGroupId"] == .string(group) })
        let again = try Self.run("slot-bulk-record", fixture: "slot-bulk-record/patient.json", values, fake: fake)
        #expect(again.body?["updatedCount"] == .number(0))
        #expect(try fake.requests().count == 2)
    }

    @Test("several caregivers each get theirs; the recording caregiver gets none")
    func caregiversAndActor() throws {
        let fake = try FCMFake()
        let household = try RecordingHousehold.make(devicesPerCaregiver: [1, 2, 1])
        let actor = household.caregivers[0]
        let values = household.values([
            "CAREGIVER_TOKEN": try caregiverToken(actor.id),
            "TAKEN_AT": Timestamp.rfc3339UTC(Date()),
        ])
        let run = try Self.run("dose-record", fixture: "dose-record/caregiver.json", values, fake: fake)
        #expect(run.response?.statusCode == 200)
        let expected = household.allTokens.subtracting(actor.tokens)
        #expect(Set(try fake.messages().compactMap { $0["token"]?.stringValue }) == expected)
        #expect(try fake.messages().count == 3)
    }

    @Test("a PRN dose pushes the plain body, once per device, and a repeated Idempotency-Key pushes nothing")
    func prnPush() throws {
        let fake = try FCMFake()
        let household = try RecordingHousehold.make(displayName: "高橋")
        let values = household.values(["MEDICATION_ID": household.prn.uuidString.lowercased()])
        let run = try Self.run("prn-record", fixture: "prn-record/patient.json", values, fake: fake)
        #expect(run.body?["updatedCount"] == .number(1) && run.body?["record"]?["quantity"] == .number(2))
        let messages = try fake.messages(to: household.allTokens)
        #expect(messages.count == 2)
        #expect(messages.allSatisfy { $0["message"]?["notification"]?["body"] == .string("高橋さんが薬を服用しました") })
        let again = try Self.run("prn-record", fixture: "prn-record/patient.json", values, fake: fake)
        #expect(again.body?["updatedCount"] == .number(0))
        #expect(try fake.requests().count == 2)
    }

    @Test("the response reaches stdout's EOF before a slow FCM answers, and the push still arrives")
    func responseBeforePush() throws {
        let fake = try FCMFake(delayMilliseconds: 2000)
        let household = try RecordingHousehold.make(devicesPerCaregiver: [1])
        let run = try Self.run("dose-record", fixture: "dose-record/patient.json", household.values(), fake: fake)
        #expect(run.response?.statusCode == 200)
        let message = try #require(try fake.messages().first)
        let received = Date(timeIntervalSince1970: (message["receivedAtMs"]?.numberValue ?? 0) / 1000)
        // The fake recorded the request when it answered, 2 s after it arrived: EOF came before that answer and the
        // process ended after it.
        #expect(run.result.standardOutputClosedAtDate < received)
        #expect(run.result.exitedAtDate >= received)
        #expect(run.result.standardOutputClosedAt < run.result.exitedAt)
    }

    @Test("20 identical slot requests in parallel: one record per medication and one push per device")
    func parallelSlots() throws {
        let fake = try FCMFake()
        let household = try RecordingHousehold.make(devicesPerCaregiver: [2, 1])
        let input = try Executables.fixture("slot-bulk-record/patient.json", household.values())
        let environment = fake.environment()
        let statuses = Mutex<[Int]>([])
        DispatchQueue.concurrentPerform(iterations: 20) { _ in
            let status = (try? Executables.run("slot-bulk-record", input: input, environment: environment))?
                .response?.statusCode
            statuses.withLock { $0.append(status ?? -1) }
        }
        #expect(statuses.withLock { $0 }.allSatisfy { $0 == 200 })
        let records = try TestDatabase.with {
            try $0.query("SELECT medication_id FROM dose_records WHERE patient_id = \(household.patient)")
        }
        #expect(records.count == 3)
        let tokens = try fake.requests().compactMap { $0["token"]?.stringValue }
        #expect(tokens.count == 3 && Set(tokens) == household.allTokens)
    }
}

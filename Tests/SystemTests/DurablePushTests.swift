import Codecs
import CaregiverPush
import Foundation
import Synchronization
import Testing
import TestSupport

/// Durable push (a committed dose always ends in a push or a recorded reason): the outbox commits with the dose,
/// senders lease, and `push-sweep` finishes what a dead sender left — exercised through the built executables, a real
/// PostgreSQL and the FCM emulator, with the recording function SIGKILLed at each stage of its run.
@Suite("durable push: outbox, leases, kills and the sweep")
struct DurablePushTests {
    /// A patient, one linked caregiver with its devices, and one medication taken at 07:00.
    struct Home {
        /// The home's own database: a sweep sends every due delivery of its database.
        let database: IsolatedDatabase
        let patient: UUID
        let patientToken: String
        let medication: UUID
        let tokens: [String]

        /// A dose-record event for yesterday's 07:00 dose, `takenAt` a given minute of that day when set.
        func doseEvent(takenAt: String? = nil) -> Data {
            let date = TokyoDay.offset(-1)
            var body =
                #"{"medicationId":"\#(medication.uuidString.lowercased())","scheduledAt":"\#(TokyoDay.instant(date, "07:00"))""#
            if let takenAt { body += #","takenAt":"\#(TokyoDay.instant(date, takenAt))""# }
            return makeEvent(path: "/api/dose-records", bearer: patientToken, body: body + "}")
        }

        var recorded: Bool {
            get throws {
                try database.with { connection in
                    try connection.query("SELECT count(*) FROM dose_records WHERE patient_id = \(patient)").single?
                        .decode(Int.self, at: 0) ?? 0
                } > 0
            }
        }
    }

    /// - Parameter markers: appended to the first device tokens, one each (the FCM fake's error scenarios).
    static func home(
        in shared: IsolatedDatabase? = nil, devices: Int = 2, medicationName: String = "秘密の薬", markers: [String] = []
    ) throws -> Home {
        let database = try shared ?? IsolatedDatabase()
        return try database.with { connection in
            let patient = try Seed.patient(connection, displayName: "高橋")
            let tokens = (0..<devices).map { index in makeDeviceToken() + (index < markers.count ? markers[index] : "")
            }
            // One linked caregiver per `PUSH_MAX_DEVICES_PER_CAREGIVER` (10) devices: each keeps all of its own.
            let perCaregiver = Configuration.defaultDeviceCap
            for first in stride(from: 0, to: max(devices, 1), by: perCaregiver) {
                let caregiver = UUID()
                try Seed.link(connection, caregiver: caregiver, patient: patient)
                for token in tokens[first..<min(first + perCaregiver, tokens.count)] {
                    try Seed.registerDevice(token, caregiver: caregiver, connection: connection)
                }
            }
            return Home(
                database: database, patient: patient, patientToken: try Seed.session(connection, patient: patient),
                medication: try Seed.medication(connection, patient: patient, name: medicationName, times: ["07:00"]),
                tokens: tokens)
        }
    }

    struct Delivery {
        let token: String
        let status: String
        let attempts: Int
        let lastError: String?
        /// Seconds from now until `next_attempt_at` (negative when due).
        let dueIn: Double
        /// Seconds from the row's last outcome (`updated_at`, written in the same statement) to `next_attempt_at`:
        /// the back-off it was given, whatever time the test took to read it.
        let backoff: Double
        let leased: Bool
    }

    static func deliveries(_ home: Home) throws -> [Delivery] {
        try home.database.with { connection in
            try connection.query(
                """
                SELECT d.token, p.status, p.attempts, p.last_error,
                       extract(epoch FROM p.next_attempt_at - now())::float8, p.lease_until IS NOT NULL,
                       extract(epoch FROM p.next_attempt_at - p.updated_at)::float8
                FROM push_deliveries p
                JOIN push_events e ON e.event_key = p.event_key
                JOIN push_devices d ON d.id = p.push_device_id
                WHERE e.patient_id = \(home.patient) ORDER BY d.token
                """
            ).map { row in
                Delivery(
                    token: try row.decode(String.self, at: 0), status: try row.decode(String.self, at: 1),
                    attempts: try row.decode(Int.self, at: 2), lastError: try row.decode(String?.self, at: 3),
                    dueIn: try row.decode(Double.self, at: 4), backoff: try row.decode(Double.self, at: 6),
                    leased: try row.decode(Bool.self, at: 5))
            }
        }
    }

    /// Whether both of the home's deliveries exist and are leased.
    static func allLeased(_ home: Home) throws -> Bool {
        let rows = try deliveries(home)
        return rows.count == home.tokens.count && rows.allSatisfy { $0.status == "SENDING" && $0.leased }
    }

    /// Waits until no delivery of the patient holds a lease that has not run out.
    static func waitForLeasesToRunOut(_ home: Home) throws -> Bool {
        try eventually(seconds: 60) {
            try home.database.with { connection in
                try connection.query(
                    """
                    SELECT count(*) FROM push_deliveries p JOIN push_events e ON e.event_key = p.event_key
                    WHERE e.patient_id = \(home.patient) AND p.status = 'SENDING' AND p.lease_until > now()
                    """
                ).single?.decode(Int.self, at: 0) ?? 1
            } == 0
        }
    }

    /// Records the home's dose with no FCM service account: the push is owed (PENDING) and nothing is sent yet.
    static func recordWithoutSending(_ home: Home, _ fake: FCMFake) throws {
        let run = try Executables.run(
            "dose-record", input: home.doseEvent(),
            environment: fake.environment(home.database, ["FCM_SERVICE_ACCOUNT_JSON": nil]))
        #expect(run.response?.statusCode == 200)
    }

    /// One `push-sweep` run (one-shot, a scheduled event on stdin): its summary and its run.
    static func sweep(
        _ fake: FCMFake, _ database: IsolatedDatabase, _ overrides: [String: String?] = [:]
    ) throws -> (summary: JSONValue?, run: Executables.Run) {
        let event =
            #"{"version":"0","id":"\#(UUID().uuidString.lowercased())","detail-type":"Scheduled Event","source":"aws.events","account":"123456789012","time":"2026-11-22T08:00:00Z","region":"us-east-1","resources":["arn:aws:events:us-east-1:123456789012:rule/push-sweep"],"detail":{}}"#
        let run = try Executables.run(
            "push-sweep", input: Data(event.utf8), environment: fake.environment(database, overrides))
        return (try? JSONValue.parse(run.result.standardOutput), run)
    }

    /// Delivered messages per device token, with the collapse ids they carried.
    static func received(_ fake: FCMFake, tokens: [String]) throws -> [String: [String]] {
        var byToken: [String: [String]] = [:]
        for token in tokens { byToken[token] = [] }
        for message in try fake.messages(to: Set(tokens)) {
            guard let token = message["token"]?.stringValue else { continue }
            byToken[token, default: []].append(
                message["message"]?["apns"]?["headers"]?["apns-collapse-id"]?.stringValue ?? "")
        }
        return byToken
    }

    // MARK: - The outbox

    @Test("the event and one PENDING delivery per device commit with the dose, even when nothing can be sent yet")
    func outboxCommitsWithTheDose() throws {
        let fake = try FCMFake()
        let home = try Self.home()
        // No service account: the recording cannot send, but the push is owed all the same.
        let run = try Executables.run(
            "dose-record", input: home.doseEvent(takenAt: "07:10"),
            environment: fake.environment(home.database, ["FCM_SERVICE_ACCOUNT_JSON": nil]))
        #expect(run.response?.statusCode == 200)
        let owed = try Self.deliveries(home)
        #expect(owed.count == 2 && owed.allSatisfy { $0.status == "PENDING" && $0.attempts == 0 && !$0.leased })
        let event = try home.database.with { connection in
            try connection.query(
                """
                SELECT event_key, kind, source, local_date::text, slot, recording_group_id, within_time
                FROM push_events WHERE patient_id = \(home.patient)
                """
            ).single
        }
        let date = TokyoDay.offset(-1)
        #expect(
            try event?.decode(String.self, at: 0)
                == "doseTaken:\(home.patient.uuidString.lowercased()):\(date):morning:07:10")
        #expect(try event?.decode(String.self, at: 1) == "DOSE_TAKEN")
        #expect(try event?.decode(String.self, at: 2) == "dose-record")
        #expect(try event?.decode(String.self, at: 3) == date)
        #expect(try event?.decode(String.self, at: 4) == "morning")
        #expect(try event?.decode(UUID?.self, at: 5) == nil)
        #expect(try event?.decode(Bool.self, at: 6) == true)
        #expect(try fake.requests().isEmpty)

        let (summary, sweepRun) = try Self.sweep(fake, home.database)
        #expect(summary?["leased"] == .number(2) && summary?["sent"] == .number(2))
        #expect(try Self.received(fake, tokens: home.tokens).values.allSatisfy { $0.count == 1 })
        #expect(try Self.deliveries(home).allSatisfy { $0.status == "SENT" && $0.attempts == 1 })
        // The sweep's metrics line: what it leased and sent, no token, no name.
        let metrics = try #require(EMF.lines(in: sweepRun.stderr).first)
        #expect(metrics.function == "push-sweep" && metrics.namespace == "CaregiverPush")
        #expect(metrics.values["SweepLeased"] == 2 && metrics.values["PushSent"] == 2)
        #expect(metrics.units["DurationMs"] == "Milliseconds" && metrics.units["PushSent"] == "Count")
        #expect(!sweepRun.stderr.contains(home.tokens[0]) && !sweepRun.stderr.contains("秘密"))
    }

    @Test("a recording's own push: sent after the response, counted in its metrics line; a repeat owes nothing")
    func recordingSendsItsOwn() throws {
        let fake = try FCMFake()
        let home = try Self.home()
        let run = try Executables.run(
            "dose-record", input: home.doseEvent(), environment: fake.environment(home.database))
        #expect(run.response?.statusCode == 200)
        #expect(try Self.deliveries(home).allSatisfy { $0.status == "SENT" })
        let metrics = try #require(EMF.lines(in: run.stderr).first)
        #expect(
            metrics.function == "dose-record" && metrics.values["PushSent"] == 2 && metrics.values["ColdStart"] == 1)
        #expect(metrics.values["PushFailed"] == 0 && metrics.values["PushRetryScheduled"] == 0)
        #expect((metrics.values["DurationMs"] ?? 0) > 0)
        let again = try Executables.run(
            "dose-record", input: home.doseEvent(), environment: fake.environment(home.database))
        #expect(again.body?["updatedCount"] == .number(0))
        #expect(EMF.lines(in: again.stderr).first?.values["PushSent"] == nil)
        #expect(try Self.received(fake, tokens: home.tokens).values.allSatisfy { $0.count == 1 })
    }

    @Test("a repeated dose-record returns the stored record's recordingGroupId")
    func repeatReturnsGroup() throws {
        let fake = try FCMFake()
        let home = try Self.home()
        let date = TokyoDay.offset(-1)
        let slot = try Executables.run(
            "slot-bulk-record",
            input: makeEvent(
                path: "/api/dose-records/slot", bearer: home.patientToken,
                body: #"{"date":"\#(date)","slot":"morning"}"#),
            environment: fake.environment(home.database))
        let group = try #require(slot.body?["recordingGroupId"]?.stringValue)
        let repeated = try Executables.run(
            "dose-record", input: home.doseEvent(), environment: fake.environment(home.database))
        #expect(repeated.body?["updatedCount"] == .number(0))
        #expect(repeated.body?["record"]?["recordingGroupId"] == .string(group))
    }

    // MARK: - Kills at each stage

    enum Stage: String, CaseIterable, CustomTestStringConvertible {
        case beforeCommit, afterCommitBeforeResponse, afterResponseBeforeSend, midSend, afterSendBeforeOutcome
        var testDescription: String { rawValue }
    }

    /// What one killed recording left, after the leases ran out and a sweep ran.
    struct KillOutcome {
        var killed = false
        var committed = false
        var pushedOnce = 0
        var pushedTwiceSameCollapse = 0
        var missed = 0
        var duplicatesWithDifferentCollapse = 0
        var sentForUncommitted = 0

        mutating func count(_ received: [String: [String]], committed: Bool) {
            self.committed = committed
            for (_, collapseIDs) in received {
                switch (committed, collapseIDs.count) {
                case (false, 0): break
                case (false, _): sentForUncommitted += collapseIDs.count
                case (true, 0): missed += 1
                case (true, 1): pushedOnce += 1
                case (true, _):
                    if Set(collapseIDs).count == 1 && collapseIDs.count == 2 {
                        pushedTwiceSameCollapse += 1
                    } else {
                        duplicatesWithDifferentCollapse += 1
                    }
                }
            }
        }
    }

    @Test(
        "SIGKILL at each stage of dose-record, then the sweep: exactly once per device, or twice under one collapse id",
        arguments: Stage.allCases)
    func killAtStage(_ stage: Stage) throws {
        let fake = try FCMFake()
        let home = try Self.home()
        // A short send deadline keeps the lease (deadline + 5 s) short; long lock waits keep held locks deciding.
        let environment = fake.environment(
            home.database,
            [
                "PUSH_SEND_DEADLINE_MS": stage == .midSend ? "4000" : "1500", "DATABASE_LOCK_TIMEOUT_MS": "30000",
            ])
        var outcome = KillOutcome()
        switch stage {
        case .beforeCommit:
            // The dose's foreign-key check needs a share lock on the medication row: hold it, and the recording
            // waits inside its transaction.
            let holder = try LockHolder(url: home.database.url)
            try holder.connection.query("SELECT 1 FROM medications WHERE id = \(home.medication) FOR UPDATE")
            let run = try KillableRun("dose-record", event: home.doseEvent(), environment: environment)
            #expect(try eventually { try holder.isBlockingSomeone })
            outcome.killed = run.kill()
            holder.release()
            #expect(run.standardOutput.isEmpty)
            #expect(try Self.deliveries(home).isEmpty)
        case .afterCommitBeforeResponse:
            let run = try KillableRun(
                "dose-record", event: home.doseEvent(), environment: environment, stalledStdout: true)
            #expect(try eventually { try home.recorded })
            // Committed, leased to the recording's own sender by its transaction; its response is stuck in a full
            // pipe nobody reads, and no send has begun. The lease runs out, and the sweep sends them.
            Thread.sleep(forTimeInterval: 0.2)
            outcome.killed = run.kill()
            #expect(try Self.deliveries(home).allSatisfy { $0.status == "SENDING" && $0.leased })
            #expect(try fake.requests().isEmpty)
        case .afterResponseBeforeSend:
            // No token in the shared cache and the mint's advisory lock held: the send waits for the lock.
            let holder = try LockHolder(url: home.database.url)
            try holder.connection.query(
                "SELECT pg_advisory_xact_lock(\(0x4643_4D54), hashtext(\(fake.clientEmail)))")
            let run = try KillableRun("dose-record", event: home.doseEvent(), environment: environment)
            #expect(run.waitForResponse()?.statusCode == 200)
            #expect(try eventually { try holder.isBlockingSomeone })
            outcome.killed = run.kill()
            holder.release()
            #expect(try fake.requests().isEmpty)
        case .midSend:
            // FCM holds each request for 2 s; the kill comes while they are in flight.
            try fake.configure(delayMilliseconds: 2000)
            let run = try KillableRun("dose-record", event: home.doseEvent(), environment: environment)
            #expect(run.waitForResponse()?.statusCode == 200)
            #expect(try eventually { try Self.allLeased(home) })
            Thread.sleep(forTimeInterval: 0.3)
            outcome.killed = run.kill()
            // FCM got them: they are delivered whatever became of the sender.
            #expect(try eventually { try fake.messages(to: Set(home.tokens)).count == 2 })
            try fake.configure(delayMilliseconds: 0)
        case .afterSendBeforeOutcome:
            // FCM answers after 1 s; meanwhile the test locks the leased rows, so recording the outcome waits.
            try fake.configure(delayMilliseconds: 1000)
            let run = try KillableRun("dose-record", event: home.doseEvent(), environment: environment)
            #expect(try eventually { try Self.allLeased(home) })
            let holder = try LockHolder(url: home.database.url)
            try holder.connection.query(
                """
                SELECT p.id FROM push_deliveries p JOIN push_events e ON e.event_key = p.event_key
                WHERE e.patient_id = \(home.patient) FOR UPDATE OF p
                """)
            #expect(try eventually { try fake.messages(to: Set(home.tokens)).count == 2 })
            #expect(try eventually { try holder.isBlockingSomeone })
            outcome.killed = run.kill()
            holder.release()
            try fake.configure(delayMilliseconds: 0)
        }
        #expect(outcome.killed, "the kill must be what ended the function")
        #expect(try Self.waitForLeasesToRunOut(home))
        _ = try Self.sweep(fake, home.database)
        outcome.count(try Self.received(fake, tokens: home.tokens), committed: try home.recorded)
        #expect(outcome.missed == 0 && outcome.sentForUncommitted == 0 && outcome.duplicatesWithDifferentCollapse == 0)
        switch stage {
        case .beforeCommit:
            #expect(!outcome.committed)
        case .afterCommitBeforeResponse, .afterResponseBeforeSend:
            #expect(outcome.committed && outcome.pushedOnce == 2)
        case .midSend:
            // The sender died after FCM had the messages: the sweep resends, under the same collapse id.
            #expect(outcome.committed && outcome.pushedTwiceSameCollapse == 2)
        case .afterSendBeforeOutcome:
            // The outcomes went to the server with their COMMIT in one flight before the kill: once the lock is
            // released the server records them (SENT), and the sweep has nothing to resend.
            #expect(outcome.committed && outcome.pushedOnce == 2)
        }
        if outcome.committed {
            #expect(try Self.deliveries(home).allSatisfy { $0.status == "SENT" })
        }
        print(
            "kill-stage \(stage.rawValue): killed=\(outcome.killed) committed=\(outcome.committed) "
                + "pushedOnce=\(outcome.pushedOnce) pushedTwiceSameCollapse=\(outcome.pushedTwiceSameCollapse) "
                + "missed=\(outcome.missed)")
    }

    @Test("randomized: recordings killed at random moments, sweeps between and after — none missed, none foreign")
    func randomizedKills() throws {
        let fake = try FCMFake()
        try fake.configure(delayMilliseconds: 40)
        let recordings = 24
        let database = try IsolatedDatabase()
        let homes = try (0..<recordings).map { _ in try Self.home(in: database) }
        let environment = fake.environment(database, ["PUSH_SEND_DEADLINE_MS": "1000"])
        var killed = 0
        var generator = SystemRandomNumberGenerator()
        for (index, home) in homes.enumerated() {
            let run = try KillableRun("dose-record", event: home.doseEvent(), environment: environment)
            Thread.sleep(forTimeInterval: Double.random(in: 0...0.2, using: &generator))
            if run.kill() { killed += 1 }
            if index % 6 == 5 { _ = try Self.sweep(fake, database) }
        }
        for home in homes { #expect(try Self.waitForLeasesToRunOut(home)) }
        _ = try Self.sweep(fake, database)
        var total = KillOutcome()
        var committed = 0
        for home in homes {
            var outcome = KillOutcome()
            outcome.count(try Self.received(fake, tokens: home.tokens), committed: try home.recorded)
            if outcome.committed { committed += 1 }
            total.pushedOnce += outcome.pushedOnce
            total.pushedTwiceSameCollapse += outcome.pushedTwiceSameCollapse
            total.missed += outcome.missed
            total.duplicatesWithDifferentCollapse += outcome.duplicatesWithDifferentCollapse
            total.sentForUncommitted += outcome.sentForUncommitted
        }
        print(
            "randomized kills: recordings=\(recordings) killed=\(killed) committed=\(committed) "
                + "devicePushedOnce=\(total.pushedOnce) devicePushedTwiceSameCollapse=\(total.pushedTwiceSameCollapse) "
                + "missed=\(total.missed) sentForUncommitted=\(total.sentForUncommitted)")
        #expect(total.missed == 0 && total.sentForUncommitted == 0 && total.duplicatesWithDifferentCollapse == 0)
        #expect(total.pushedOnce + total.pushedTwiceSameCollapse == committed * 2)
    }
}

extension FCMFake {
    /// The function environment pointing at this fake and at `database`.
    func environment(_ database: IsolatedDatabase, _ overrides: [String: String?] = [:]) -> [String: String] {
        var all = overrides
        all["DATABASE_URL"] = TestDatabase.runtimeURL(for: database.url)
        return environment(all)
    }
}

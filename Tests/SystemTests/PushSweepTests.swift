import Codecs
import CaregiverPush
import Foundation
import Synchronization
import Testing
import TestSupport

/// `push-sweep` (docs/behaviour.md#sweep): concurrent sweeps, back-off, expiry, stale devices, retention, the Lambda
/// deadline — each test in a database of its own, through the built executables and the FCM emulator.
@Suite("push-sweep")
struct PushSweepTests {
    typealias Home = DurablePushTests.Home

    /// `count` enabled DEV devices of one linked caregiver, written in one statement, and one event owing each a
    /// PENDING delivery (written by the outbox, as a recording would).
    static func crowd(_ count: Int, database: IsolatedDatabase) throws -> (patient: UUID, tokens: Set<String>) {
        try database.with { connection in
            let patient = try Seed.patient(connection, displayName: "大勢")
            let caregiver = UUID()
            try Seed.link(connection, caregiver: caregiver, patient: patient)
            let tokens = try connection.query(
                """
                INSERT INTO push_devices (owner_type, owner_id, token, token_sha256, platform, environment)
                SELECT 'CAREGIVER', \(caregiver), t, sha256(convert_to(t, 'UTF8')), 'ios', 'DEV'
                FROM (SELECT 'crowd-' || gen_random_uuid() || ':APA91b' AS t FROM generate_series(1, \(count))) s
                RETURNING token
                """
            ).map { try $0.decode(String.self, at: 0) }
            let event = DoseTakenEvent(
                patientID: AppID(patient), date: TokyoDay.offset(-1), slot: .noon, recordingGroupID: AppID(UUID()),
                takenAt: Date(),
                withinTime: false, actingCaregiverID: nil)
            // One caregiver with `count` devices: the cap per caregiver raised so that every one is owed.
            _ = try connection.withTransaction { connection in
                try PushOutbox.enqueue(
                    event, source: .slotBulkRecord, environment: .development, deviceCap: count,
                    connection: connection)
            }
            return (patient, Set(tokens))
        }
    }

    @Test("two sweeps at once over 1,000 due deliveries: each delivery is sent exactly once")
    func concurrentSweeps() throws {
        let fake = try FCMFake()
        // 20 batches of 50, each at least 50 ms at FCM: a second of work, so the two processes overlap even when one
        // starts late on a loaded machine.
        try fake.configure(delayMilliseconds: 50)
        let database = try IsolatedDatabase()
        let (_, tokens) = try Self.crowd(1000, database: database)
        let summaries = Mutex<[JSONValue]>([])
        let environment = fake.environment(database, ["PUSH_SWEEP_BATCH_SIZE": "50"])
        DispatchQueue.concurrentPerform(iterations: 2) { _ in
            let run = try? Executables.run("push-sweep", input: Data("{}".utf8), environment: environment)
            let summary = run.flatMap { try? JSONValue.parse($0.result.standardOutput) }
            summaries.withLock { $0.append(summary ?? .null) }
        }
        let sent = summaries.withLock { $0.map { Int($0["sent"]?.integerValue ?? -1) } }
        print("concurrent sweeps: sent \(sent) of 1000")
        #expect(sent.reduce(0, +) == 1000)
        let received = try fake.messages(to: tokens).compactMap { $0["token"]?.stringValue }
        #expect(received.count == 1000 && Set(received) == tokens)
        let statuses = try database.with { connection in
            try connection.query("SELECT status, count(*) FROM push_deliveries GROUP BY status").map {
                "\(try $0.decode(String.self, at: 0))=\(try $0.decode(Int.self, at: 1))"
            }
        }
        #expect(statuses == ["SENT=1000"])
    }

    @Test("a transient failure goes back to PENDING, not due before its back-off or Retry-After; the sweep sends it")
    func transientLeftToTheSweep() throws {
        let fake = try FCMFake()
        let database = try IsolatedDatabase()
        let home = try DurablePushTests.home(in: database, devices: 0)
        let unavailable = makeDeviceToken() + "UNAVAILABLE_ONCE"
        let quota = makeDeviceToken() + "QUOTA_ONCE"
        try database.with { connection in
            let caregiver = UUID()
            try Seed.link(connection, caregiver: caregiver, patient: home.patient)
            for token in [unavailable, quota] {
                try Seed.registerDevice(token, caregiver: caregiver, connection: connection)
            }
        }
        // The default send deadline (10 s): the recording's send makes one attempt per device whatever time is left,
        // and leaves the retry to the sweep (the deadline's own cut-off is DeliveryRunTests', at chosen instants).
        let run = try Executables.run("dose-record", input: home.doseEvent(), environment: fake.environment(database))
        #expect(run.response?.statusCode == 200)
        let owed = try DurablePushTests.deliveries(home)
        #expect(owed.count == 2 && owed.allSatisfy { $0.status == "PENDING" && $0.attempts == 1 && !$0.leased })
        #expect(owed.first { $0.token == unavailable }?.lastError == "503 UNAVAILABLE")
        // The first back-off: 0.5 s with equal jitter, counted from the answer's recording (not from this read).
        let backoff = owed.first { $0.token == unavailable }?.backoff ?? 0
        #expect(backoff >= 0.25 && backoff <= 0.5)
        // 429 with Retry-After: 1 — not due before a second has passed.
        #expect(owed.first { $0.token == quota }?.backoff == 1)
        #expect(EMF.lines(in: run.stderr).first?.values["PushRetryScheduled"] == 2)
        // Not due yet: a sweep now leaves them alone. The first back-off (250–500 ms) can run out while a loaded
        // machine starts the sweep, so both due times are held an hour away for that sweep, then given back.
        try Self.shiftDueTimes(of: home, by: "1 hour")
        #expect(try DurablePushTests.sweep(fake, database).summary?["leased"] == .number(0))
        try Self.shiftDueTimes(of: home, by: "-1 hour")
        #expect(try eventually { try DurablePushTests.deliveries(home).allSatisfy { $0.dueIn < 0 } })
        let (summary, _) = try DurablePushTests.sweep(fake, database)
        #expect(summary?["sent"] == .number(2))
        let done = try DurablePushTests.deliveries(home)
        #expect(done.allSatisfy { $0.status == "SENT" && $0.attempts == 2 && $0.lastError == nil })
        #expect(try fake.messages(to: [unavailable, quota]).count == 2)
    }

    /// Moves the due time of every delivery owed for the home's patient by `interval` (an SQL interval).
    static func shiftDueTimes(of home: DurablePushTests.Home, by interval: String) throws {
        try home.database.with { connection in
            try connection.query(
                """
                UPDATE push_deliveries p SET next_attempt_at = p.next_attempt_at + \(interval)::interval
                FROM push_events e WHERE e.event_key = p.event_key AND e.patient_id = \(home.patient)
                """)
        }
    }

    @Test("an event older than PUSH_MAX_AGE_SECONDS is never sent: EXPIRED")
    func expiry() throws {
        let fake = try FCMFake()
        let database = try IsolatedDatabase()
        let home = try DurablePushTests.home(in: database)
        try DurablePushTests.recordWithoutSending(home, fake)
        #expect(try DurablePushTests.deliveries(home).allSatisfy { $0.status == "PENDING" })
        Thread.sleep(forTimeInterval: 1.5)
        let (summary, run) = try DurablePushTests.sweep(fake, database, ["PUSH_MAX_AGE_SECONDS": "1"])
        #expect(summary?["expired"] == .number(2) && summary?["leased"] == .number(0))
        let rows = try DurablePushTests.deliveries(home)
        #expect(
            rows.count == 2 && rows.allSatisfy { $0.status == "EXPIRED" && $0.lastError?.hasPrefix("expired") == true })
        #expect(try fake.requests().isEmpty)
        #expect(EMF.lines(in: run.stderr).first?.values["PushExpired"] == 2)
        // The same rows a second time: nothing more to do.
        #expect(try DurablePushTests.sweep(fake, database).summary?["expired"] == .number(0))
    }

    @Test("an old event's lease that ran out is EXPIRED too; one a live sender still holds is left to it")
    func expiryOfLeases() throws {
        let fake = try FCMFake()
        let database = try IsolatedDatabase()
        let home = try DurablePushTests.home(in: database)
        try DurablePushTests.recordWithoutSending(home, fake)
        // One delivery's sender died (its lease ran out a second ago); the other's is still sending.
        try database.with { connection in
            try connection.query(
                """
                WITH r AS (SELECT id, row_number() OVER (ORDER BY id) AS n FROM caregiver_push.push_deliveries)
                UPDATE caregiver_push.push_deliveries p
                SET status = 'SENDING', lease_token = gen_random_uuid(),
                    lease_until = CASE WHEN r.n = 1 THEN now() - interval '1 second' ELSE now() + interval '1 hour' END
                FROM r WHERE p.id = r.id
                """)
        }
        Thread.sleep(forTimeInterval: 1.5)
        let (summary, _) = try DurablePushTests.sweep(fake, database, ["PUSH_MAX_AGE_SECONDS": "1"])
        #expect(summary?["expired"] == .number(1) && summary?["leased"] == .number(0))
        #expect(try DurablePushTests.deliveries(home).map(\.status).sorted() == ["EXPIRED", "SENDING"])
        #expect(try fake.requests().isEmpty)
    }

    @Test("a device that goes unrenewed for PUSH_DEVICE_STALE_DAYS once owed is disabled STALE and not sent to")
    func staleDevice() throws {
        let fake = try FCMFake()
        let database = try IsolatedDatabase()
        let home = try DurablePushTests.home(in: database)
        let (stale, fresh) = (home.tokens[0], home.tokens[1])
        // Owed while renewed; the bound passes before the sweep sends.
        try DurablePushTests.recordWithoutSending(home, fake)
        try database.with { connection in
            try connection.query(
                "UPDATE push_devices SET last_seen_at = now() - interval '31 days' WHERE token = \(stale)")
        }
        let (summary, run) = try DurablePushTests.sweep(fake, database)
        #expect(summary?["devicesPruned"] == .number(1) && summary?["sent"] == .number(1))
        #expect(EMF.lines(in: run.stderr).first?.values["DevicesPruned"] == 1)
        let device = try database.with { try Seed.devices($0, token: stale) }.first
        #expect(device?.isEnabled == false && device?.disabledReason == "STALE")
        #expect(try database.with { try Seed.devices($0, token: fresh) }.first?.isEnabled == true)
        let rows = try DurablePushTests.deliveries(home)
        #expect(rows.first { $0.token == stale }?.status == "FAILED")
        #expect(rows.first { $0.token == stale }?.lastError == "device disabled (STALE) before sending")
        #expect(rows.first { $0.token == fresh }?.status == "SENT")
        #expect(try fake.messages().compactMap { $0["token"]?.stringValue } == [fresh])
    }

    @Test("a recording owes nothing to a device not renewed for PUSH_DEVICE_STALE_DAYS, before any sweep")
    func unrenewedDeviceIsOwedNothing() throws {
        let fake = try FCMFake()
        let database = try IsolatedDatabase()
        let home = try DurablePushTests.home(in: database)
        let (stale, fresh) = (home.tokens[0], home.tokens[1])
        try database.with { connection in
            try connection.query(
                "UPDATE push_devices SET last_seen_at = now() - interval '30 days 1 minute' WHERE token = \(stale)")
            try connection.query(
                "UPDATE push_devices SET last_seen_at = now() - interval '29 days 23 hours' WHERE token = \(fresh)")
        }
        try DurablePushTests.recordWithoutSending(home, fake)
        let rows = try DurablePushTests.deliveries(home)
        #expect(rows.map(\.token) == [fresh])
        #expect(try database.with { try Seed.devices($0, token: stale) }.first?.isEnabled == true)
    }

    @Test("a device disabled longer than PUSH_RETENTION_DAYS is deleted; one disabled lately and an enabled one stay")
    func oldDisabledDevices() throws {
        let fake = try FCMFake()
        let database = try IsolatedDatabase()
        let home = try DurablePushTests.home(in: database, devices: 3)
        let (old, recent, enabled) = (home.tokens[0], home.tokens[1], home.tokens[2])
        try database.with { connection in
            try connection.query(
                """
                UPDATE push_devices SET is_enabled = false, disabled_reason = 'USER_DISABLED',
                    updated_at = now() - make_interval(days => CASE WHEN token = \(old) THEN 31 ELSE 29 END)
                WHERE token IN (\(old), \(recent))
                """)
            try connection.query(
                "UPDATE push_devices SET updated_at = now() - interval '400 days' WHERE token = \(enabled)")
        }
        let (summary, _) = try DurablePushTests.sweep(fake, database)
        #expect(summary?["devicesDeleted"] == .number(1))
        #expect(try database.with { try Seed.devices($0, token: old) }.isEmpty)
        #expect(try database.with { try Seed.devices($0, token: recent) }.first?.isEnabled == false)
        #expect(try database.with { try Seed.devices($0, token: enabled) }.first?.isEnabled == true)
    }

    @Test("retention deletes final deliveries and events older than PUSH_RETENTION_DAYS, and nothing else")
    func retention() throws {
        let fake = try FCMFake()
        let database = try IsolatedDatabase()
        // Four events of one device each: old and done; old but with a delivery still owed; recently done; new.
        var homes: [Home] = []
        for _ in 0..<4 {
            let home = try DurablePushTests.home(in: database, devices: 1)
            try DurablePushTests.recordWithoutSending(home, fake)
            homes.append(home)
        }
        try database.with { connection in
            func age(_ home: Home, event days: Int, delivery status: String, changed changedDays: Int) throws {
                try connection.query(
                    """
                    UPDATE push_events SET created_at = now() - make_interval(days => \(days))
                    WHERE patient_id = \(home.patient)
                    """)
                try connection.query(
                    """
                    UPDATE push_deliveries p SET status = \(status), updated_at = now() - make_interval(days => \(changedDays))
                    FROM push_events e WHERE e.event_key = p.event_key AND e.patient_id = \(home.patient)
                    """)
            }
            try age(homes[0], event: 40, delivery: "SENT", changed: 40)
            try age(homes[1], event: 40, delivery: "PENDING", changed: 40)
            try age(homes[2], event: 10, delivery: "FAILED", changed: 10)
        }
        // No service account: the sweep expires and deletes, but sends nothing.
        let (summary, _) = try DurablePushTests.sweep(fake, database, ["FCM_SERVICE_ACCOUNT_JSON": nil])
        #expect(summary?["deliveriesDeleted"] == .number(1) && summary?["eventsDeleted"] == .number(1))
        let kept = try homes.map { try DurablePushTests.deliveries($0).map(\.status) }
        #expect(kept[0] == [])
        // Old but owed: expired now (never sent late), and kept until its own retention has passed.
        #expect(kept[1] == ["EXPIRED"])
        #expect(kept[2] == ["FAILED"])
        #expect(kept[3] == ["PENDING"])
        let events = try database.with { connection in
            try homes.map { home in
                try connection.query("SELECT count(*) FROM push_events WHERE patient_id = \(home.patient)").single?
                    .decode(Int.self, at: 0) ?? -1
            }
        }
        #expect(events == [0, 1, 1, 1])
        // Dose records are never touched by the sweep.
        #expect(try homes.allSatisfy { try $0.recorded })
    }

    @Test("a scheduled event, {} and nothing else: a bad event is a 400 problem and changes nothing")
    func eventShapes() throws {
        let fake = try FCMFake()
        let database = try IsolatedDatabase()
        let home = try DurablePushTests.home(in: database)
        try DurablePushTests.recordWithoutSending(home, fake)
        for bad in ["", "[]", #"{"detail-type":"Object Created","source":"aws.s3"}"#, #"{"a":1,"a":2}"#, "{\"x\":"] {
            let run = try Executables.run(
                "push-sweep", input: Data(bad.utf8), environment: fake.environment(database))
            #expect(run.result.exitStatus == 0)
            let problem = try? JSONValue.parse(run.result.standardOutput)
            #expect(problem?["status"] == .number(400) && problem?["type"] == .string("/problems/bad-request"))
        }
        #expect(try DurablePushTests.deliveries(home).allSatisfy { $0.status == "PENDING" })
        let empty = try Executables.run(
            "push-sweep", input: Data("{}".utf8), environment: fake.environment(database))
        #expect((try? JSONValue.parse(empty.result.standardOutput))?["sent"] == .number(2))
    }

    @Test("no DATABASE_URL: a 500 problem and a log line naming it; an unreachable database: counts, no crash")
    func missingConfigurationAndStoppedDatabase() throws {
        let unset = try Executables.run(
            "push-sweep", input: Data("{}".utf8), environment: testEnvironment(["DATABASE_URL": nil]))
        #expect(unset.result.exitStatus == 0)
        let problem = try? JSONValue.parse(unset.result.standardOutput)
        #expect(problem?["status"] == .number(500) && problem?["type"] == .string("/problems/internal"))
        #expect(unset.stderr.contains(#""config.variable":"DATABASE_URL""#))
        let down = try Executables.run(
            "push-sweep", input: Data("{}".utf8),
            environment: testEnvironment(["DATABASE_URL": "postgresql://postgres@127.0.0.1:1/none?connect_timeout=2"]))
        #expect(down.result.exitStatus == 0)
        let summary = try? JSONValue.parse(down.result.standardOutput)
        #expect(summary?["stoppedEarly"] == .string("database") && summary?["sent"] == .number(0))
        #expect(down.stderr.contains(#""msg":"push sweep stopped early""#))
        #expect(!down.stderr.contains("postgresql://"))
    }

    @Test("Lambda deadline: FCM slow, the deadline 2 s away — answered, back at /next in time, the sweep delivers")
    func lambdaDeadline() throws {
        let fake = try FCMFake()
        try fake.configure(delayMilliseconds: 4000)
        let database = try IsolatedDatabase()
        let home = try DurablePushTests.home(in: database)
        // The runner plays Lambda: Lambda-Runtime-Deadline-Ms is the hand-out plus the table's 2 s, and a worker not
        // back at /next by then is killed.
        let table = try doseRecordOnlyTable(timeoutSeconds: 2)
        defer { try? FileManager.default.removeItem(at: table) }
        let server = try RunnerServer(
            arguments: [
                "--mode", "warm", "--warm-workers", "1", "--debug-headers", "--queue-timeout-ms", "20000",
                "--functions", table.path,
            ],
            environment: fake.environment(database, ["PUSH_SEND_DEADLINE_MS": "10000"]))
        let event = try JSONValue.parse(Array(home.doseEvent()))
        let body = event["body"]?.stringValue ?? ""
        let headers = ["content-type": "application/json", "authorization": "Bearer \(home.patientToken)"]
        let first = try server.request("POST", "/api/dose-records", headers: headers, body: body)
        #expect(first.status == 200)
        let worker = try #require(first.headers["x-gateway-pid"].flatMap(Int32.init))
        // Past the deadline: the worker gave up on FCM in time and is waiting at /next, not killed.
        Thread.sleep(forTimeInterval: 2.5)
        let second = try server.request("POST", "/api/dose-records", headers: headers, body: body)
        #expect(second.status == 200 && second.json?["updatedCount"] == .number(0))
        #expect(second.headers["x-gateway-pid"].flatMap(Int32.init) == worker)
        #expect(!server.stderr.contains("post-response work exceeded the timeout"))
        let owed = try DurablePushTests.deliveries(home)
        #expect(owed.count == 2 && owed.allSatisfy { $0.status == "PENDING" && $0.lastError == "deadline exceeded" })
        try fake.configure(delayMilliseconds: 0)
        #expect(try eventually { try DurablePushTests.deliveries(home).allSatisfy { $0.dueIn < 0 } })
        _ = try DurablePushTests.sweep(fake, database)
        #expect(try DurablePushTests.deliveries(home).allSatisfy { $0.status == "SENT" })
        // What reached FCM before the deadline is delivered too; a resend carries the same collapse id.
        let received = try DurablePushTests.received(fake, tokens: home.tokens)
        #expect(received.values.allSatisfy { !$0.isEmpty && Set($0).count == 1 })
    }

    @Test(
        "the runner runs push-sweep on its schedule: a stuck delivery is delivered with no manual call",
        arguments: ["cold", "warm"])
    func runnerSchedule(mode: String) throws {
        let fake = try FCMFake()
        let database = try IsolatedDatabase()
        let home = try DurablePushTests.home(in: database)
        try DurablePushTests.recordWithoutSending(home, fake)
        #expect(try DurablePushTests.deliveries(home).allSatisfy { $0.status == "PENDING" })
        // Nothing but the runner, with its schedule at 500 ms instead of a minute.
        let server = try RunnerServer(
            arguments: ["--mode", mode, "--schedule-interval-ms", "500"], environment: fake.environment(database))
        #expect(try eventually { try DurablePushTests.deliveries(home).allSatisfy { $0.status == "SENT" } })
        #expect(try DurablePushTests.received(fake, tokens: home.tokens).values.allSatisfy { $0.count == 1 })
        #expect(server.logs(#""function":"push-sweep""#) && server.logs(#""summary.sent":2"#))
    }
}

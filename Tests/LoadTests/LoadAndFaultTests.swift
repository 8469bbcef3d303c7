import Libpq
import Migrations
import CaregiverPush
import Foundation
import Logging
import Synchronization
import Testing
import TestFixtures
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Hardening: bounded mixed load on the runner, the database going away and coming back under load,
/// FCM failing in every way FCM can (docs/behaviour.md#outcomes), and functions killed mid-transaction.
///
/// `LOAD_SECONDS` sets the load phases' length (`make test`: short; `make soak`: long). Nothing here asserts a
/// duration: the checks are about what was answered and what was stored and sent.
@Suite("load and faults", .serialized)
struct LoadAndFaultTests {
    static var loadSeconds: Double {
        ProcessInfo.processInfo.environment["LOAD_SECONDS"].flatMap(Double.init) ?? 12
    }

    static var clients: Int {
        ProcessInfo.processInfo.environment["LOAD_CLIENTS"].flatMap(Int.init) ?? 6
    }

    @Test("mixed load on the warm runner: no 5xx, no duplicate record or push, every answered record stored and pushed")
    func steadyLoad() throws {
        let fake = try FCMFake()
        let marker = "負荷秘密\(UUID().uuidString.prefix(6))"
        let households = try (0..<3).map { _ in try LoadHousehold.seed(url: TestDatabase.url, marker: marker) }
        let server = try RunnerServer(
            arguments: ["--mode", "warm"], environment: fake.environment(["LOG_LEVEL": "info"]))
        let driver = try LoadDriver(client: server.client, households: households)
        let outcomes = driver.run(clients: Self.clients, seconds: Self.loadSeconds)
        // SIGTERM drains: every push the answered requests started has finished when the runner has exited.
        #expect(server.stop() == 0)

        let byStatus = Dictionary(grouping: outcomes, by: \.status).mapValues(\.count)
        let messages = try fake.messages()
        print(
            "load: \(outcomes.count) requests in \(Self.loadSeconds) s from \(Self.clients) clients, by status \(byStatus), "
                + "by route \(Dictionary(grouping: outcomes, by: \.kind.rawValue).mapValues(\.count)), "
                + "recordings with updatedCount > 0: \(outcomes.filter { $0.updatedCount > 0 }.count), FCM messages: \(messages.count)"
        )
        #expect(
            outcomes.count > Self.clients * 10,
            "the load made too few requests to mean anything: \(outcomes.map { ($0.kind, $0.status, $0.started, $0.ended) })"
        )
        #expect(byStatus.keys.allSatisfy { $0 == 200 }, "answers by status: \(byStatus)")
        for kind in [LoadOutcome.Kind.dose, .slot, .prn, .register, .unregister] {
            #expect(outcomes.contains { $0.kind == kind && $0.status == 200 }, "no successful \(kind.rawValue)")
        }
        #expect(
            outcomes.contains { $0.kind == .dose && $0.updatedCount == 0 }, "no repeated dose: the load did not collide"
        )

        var verdict = LoadVerdict()
        try verdict.checkRecords(outcomes, households: households, url: TestDatabase.url, exhaustive: true)
        verdict.checkPushes(outcomes, households: households, messages: messages, exactlyOnce: true)
        #expect(verdict.problems.isEmpty, "\(verdict.problems)")
        let unsettled = try deliveryStatuses(owners: households.flatMap { $0.caregivers.map(\.id) }).filter {
            $0 != "SENT"
        }
        #expect(unsettled.isEmpty, "deliveries not SENT while FCM answered every send: \(unsettled)")
        #expect(!server.stderr.contains(marker), "a medication name reached the runner's log")
        let everything = try fake.requests().map { String(describing: $0) }.joined()
        #expect(!everything.contains(marker), "a medication name reached FCM")
    }

    @Test("PostgreSQL stopped and restarted under load: 503 problems only during the outage, then full recovery")
    func databaseOutage() throws {
        let database = try OwnDatabase(port: 25437)
        defer { database.remove() }
        let fake = try FCMFake()
        let households = try (0..<2).map { _ in try LoadHousehold.seed(url: database.url, marker: "停止") }
        let server = try RunnerServer(
            arguments: ["--mode", "warm"], environment: fake.environment(["DATABASE_URL": database.runtimeURL]))
        let driver = try LoadDriver(client: server.client, households: households)
        // A warm process's session that sits idle through the outage, as most of the pool's workers do.
        let idleSession = DatabaseSession(url: database.url)
        defer { idleSession.close() }
        try idleSession.connection().query("SELECT 1")
        let loadSeconds = max(Self.loadSeconds, 12)
        let timeline = Timeline()
        let outage = Thread {
            Thread.sleep(forTimeInterval: loadSeconds / 4)
            timeline.mark("stopping")
            database.stop()
            timeline.mark("stopped")
            Thread.sleep(forTimeInterval: loadSeconds / 4)
            timeline.mark("starting")
            database.start()
            timeline.mark("started")
        }
        timeline.begin()
        outage.start()
        let outcomes = driver.run(clients: Self.clients, seconds: loadSeconds)
        #expect(server.stop() == 0)
        let stopping = try #require(timeline["stopping"])
        let started = try #require(timeline["started"])

        let byStatus = Dictionary(grouping: outcomes, by: \.status).mapValues(\.count)
        print(
            String(
                format: "outage: %d requests, by status %@; PostgreSQL down from %.2f s to %.2f s (stop began %.2f s)",
                outcomes.count, "\(byStatus)", try #require(timeline["stopped"]), started, stopping))
        #expect(Set(byStatus.keys).isSubset(of: [200, 503]), "answers by status: \(byStatus)")
        #expect((byStatus[503] ?? 0) > 0, "the outage was not seen: \(byStatus)")
        let unavailable = outcomes.filter { $0.status == 503 }
        #expect(unavailable.allSatisfy { $0.contentType == "application/problem+json" && $0.retryAfter != nil })
        // A request answered 503 must have been in flight during the outage (plus a second for the first requests
        // after the restart, which may still find the server starting up).
        let late = unavailable.filter { $0.ended < stopping || $0.started > started + 1 }
        #expect(
            late.isEmpty, "503s outside the outage [\(stopping), \(started)]: \(late.map { ($0.started, $0.ended) })")
        let recovered = outcomes.filter { $0.started > started + 1 }
        #expect(recovered.count > Self.clients * 3 && recovered.allSatisfy { $0.status == 200 }, "no full recovery")

        // Its first query after the restart reconnects instead of failing.
        #expect(throws: Never.self) { try idleSession.connection().query("SELECT 1") }

        var verdict = LoadVerdict()
        try verdict.checkRecords(outcomes, households: households, url: database.url, exhaustive: false)
        verdict.checkPushes(outcomes, households: households, messages: try fake.messages(), exactlyOnce: false)
        #expect(verdict.problems.isEmpty, "\(verdict.problems)")
    }

    @Test(
        "FCM failing: records intact, every delivery SENT, DISABLED_TOKEN or PENDING again for the sweep",
        arguments: FCMFailure.allCases)
    func fcmFailing(_ failure: FCMFailure) throws {
        let fake = try FCMFake()
        // Port 9 (discard) has no listener on a test machine: connections to it are refused.
        let refused = "http://127.0.0.1:9"
        var environment = fake.environment(["PUSH_SEND_DEADLINE_MS": "3000"])
        var tokens = (0..<4).map { _ in makeDeviceToken() }
        switch failure {
        case .errorAnswers:
            // One device per kind of FCM error: unavailable for good, failing once, gone, throttled once.
            tokens = zip(tokens, ["UNAVAILABLE_ALWAYS", "INTERNAL_ONCE", "UNREGISTERED", "QUOTA_ONCE"]).map { $0 + $1 }
        case .timeouts:
            try fake.configure(delayMilliseconds: 10_000)
        case .connectionRefused:
            environment["FCM_API_BASE_URL"] = refused
        case .oauthRefused:
            let account = fake.serviceAccountJSON.replacingOccurrences(
                of: fake.baseURL + "/token", with: refused + "/token")
            try #require(account != fake.serviceAccountJSON)
            environment["FCM_SERVICE_ACCOUNT_JSON"] = Data(account.utf8).base64EncodedString()
        }
        let household = try RecordingHousehold.make(devicesPerCaregiver: [0, 0])
        try TestDatabase.with { connection in
            for (index, token) in tokens.enumerated() {
                try Seed.registerDevice(
                    token, caregiver: household.caregivers[index / 2].id, connection: connection)
            }
        }
        let run = try Executables.run(
            "slot-bulk-record", input: try Executables.fixture("slot-bulk-record/patient.json", household.values()),
            environment: environment)
        #expect(run.response?.statusCode == 200)
        #expect(run.body?["updatedCount"] == .number(3))
        let records = try TestDatabase.with { connection in
            try connection.query("SELECT count(*) FROM dose_records WHERE patient_id = \(household.patient)")[0]
                .decode(Int.self, at: 0)
        }
        let statuses = try deliveryStatuses(owners: household.caregivers.map(\.id))
        #expect(records == 3)
        #expect(statuses.count == 4, "one delivery row per device")
        // Nothing is lost and nothing stays leased: what FCM did not take is PENDING again, owed to the sweep.
        #expect(statuses.allSatisfy { ["SENT", "DISABLED_TOKEN", "PENDING"].contains($0) }, "\(statuses)")
        switch failure {
        case .errorAnswers:
            // The recording's own send makes one attempt per device: what failed once (INTERNAL, QUOTA) is PENDING
            // again like what fails for good, due after its back-off, for the sweep (docs/behaviour.md#sending-retries).
            #expect(statuses.sorted() == ["DISABLED_TOKEN", "PENDING", "PENDING", "PENDING"])
        case .timeouts, .connectionRefused, .oauthRefused:
            #expect(statuses == ["PENDING", "PENDING", "PENDING", "PENDING"])
        }
    }

    enum FCMFailure: String, CaseIterable, CustomTestStringConvertible {
        case errorAnswers, timeouts, connectionRefused, oauthRefused
        var testDescription: String { rawValue }
    }

    @Test("slot-bulk-record killed with SIGKILL between two inserts of its transaction: nothing of it is stored")
    func killedMidSlot() throws {
        let household = try RecordingHousehold.make()
        // The blocker holds the second morning dose's row uncommitted: the function inserts the first, then waits.
        let blocker = try TestDatabase.connect()
        defer { blocker.close() }
        let second = TokyoDay.instant(household.date, "08:00")
        try blocker.query("BEGIN")
        try blocker.query(
            """
            INSERT INTO dose_records (patient_id, medication_id, scheduled_at, taken_at, recorded_by_role, recorded_by_id)
            VALUES (\(household.patient), \(household.morning[1]), \(second)::timestamptz, now(), 'PATIENT',
                    \(household.patient))
            """)
        let victim = try startFunction(
            "slot-bulk-record", input: try Executables.fixture("slot-bulk-record/patient.json", household.values()))
        let waiting = try waitUntilBlocked(by: blocker)
        kill(victim.processIdentifier, SIGKILL)
        victim.waitUntilExit()
        try blocker.query("ROLLBACK")
        try waitUntilGone(backend: waiting)
        let stored = try TestDatabase.with { connection in
            try connection.query("SELECT count(*) FROM dose_records WHERE patient_id = \(household.patient)")[0]
                .decode(Int.self, at: 0)
        }
        #expect(victim.terminationReason == .uncaughtSignal)
        #expect(stored == 0, "the killed transaction left \(stored) records")
    }

    @Test("push-register killed with SIGKILL mid-rotation: the old device stays, the new token is not stored")
    func killedMidRotation() throws {
        let caregiver = UUID()
        let old = makeDeviceToken()
        let new = makeDeviceToken()
        let installation = "install-\(UUID().uuidString)"
        try TestDatabase.with { connection in
            _ = try PushDeviceRegistry(connection: connection).register(
                .init(token: old, platform: .ios, environment: .development, installationID: installation),
                caregiverID: caregiver)
        }
        // The blocker locks the old row: the function upserts the new token, then waits to disable the old one.
        let blocker = try TestDatabase.connect()
        defer { blocker.close() }
        try blocker.query("BEGIN")
        try blocker.query("SELECT id FROM push_devices WHERE owner_id = \(caregiver) FOR UPDATE")
        let victim = try startFunction(
            "push-register",
            input: try Executables.fixture(
                "push-register/valid.json",
                [
                    "CAREGIVER_TOKEN": try caregiverToken(caregiver), "DEVICE_TOKEN": new,
                    "INSTALLATION_ID": installation,
                ]))
        let waiting = try waitUntilBlocked(by: blocker)
        kill(victim.processIdentifier, SIGKILL)
        victim.waitUntilExit()
        try blocker.query("ROLLBACK")
        try waitUntilGone(backend: waiting)
        let devices = try TestDatabase.with { try Seed.devices($0, owner: caregiver) }
        #expect(devices.map(\.token) == [old])
        #expect(devices.first?.isEnabled == true && devices.first?.disabledReason == nil)
    }

    // MARK: helpers

    /// The status of every delivery row to a device of these caregivers.
    private func deliveryStatuses(owners: [UUID]) throws -> [String] {
        try TestDatabase.with { connection in
            try owners.flatMap { owner in
                try connection.query(
                    """
                    SELECT pd.status FROM push_deliveries pd JOIN push_devices d ON d.id = pd.push_device_id
                    WHERE d.owner_type = 'CAREGIVER' AND d.owner_id = \(owner)
                    """
                ).map { try $0.decode(String.self, at: 0) }
            }
        }
    }

    /// A function process fed `input` on stdin, left running.
    private func startFunction(_ function: String, input: Data) throws -> Process {
        let process = Process()
        process.executableURL = Executables.binDirectory.appendingPathComponent(function)
        process.environment = testEnvironment(["LOG_LEVEL": "error"])
        let stdin = Pipe()
        process.standardInput = stdin
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        try stdin.fileHandleForWriting.write(contentsOf: input)
        try stdin.fileHandleForWriting.close()
        return process
    }

    /// The backend waiting on one of `blocker`'s locks, once there is one.
    private func waitUntilBlocked(by blocker: PostgresConnection) throws -> Int {
        let blockerPID = try blocker.query("SELECT pg_backend_pid()")[0].decode(Int.self, at: 0)
        return try TestDatabase.with { connection in
            for _ in 0..<400 {
                if let row = try connection.query(
                    "SELECT pid FROM pg_stat_activity WHERE \(blockerPID) = ANY(pg_blocking_pids(pid))"
                ).first {
                    return try row.decode(Int.self, at: 0)
                }
                Thread.sleep(forTimeInterval: 0.05)
            }
            throw FaultError("the function never blocked on the test's lock")
        }
    }

    /// Waits until PostgreSQL has ended the killed client's backend (its transaction rolled back).
    private func waitUntilGone(backend: Int) throws {
        try TestDatabase.with { connection in
            for _ in 0..<400 {
                if try connection.query("SELECT 1 FROM pg_stat_activity WHERE pid = \(backend)").isEmpty { return }
                Thread.sleep(forTimeInterval: 0.05)
            }
            throw FaultError("the killed function's backend lived on")
        }
    }

}

struct FaultError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Named instants, in seconds since ``begin()``, written by one thread and read by another.
final class Timeline: Sendable {
    private let state = Mutex<(start: ContinuousClock.Instant, marks: [String: Double])>((.now, [:]))

    func begin() { state.withLock { $0 = (.now, [:]) } }

    func mark(_ name: String) { state.withLock { $0.marks[name] = (ContinuousClock.now - $0.start).seconds } }

    subscript(name: String) -> Double? { state.withLock { $0.marks[name] } }
}

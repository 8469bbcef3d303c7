import Codecs
import Libpq
import ProcessSupervision
import CaregiverPush
import Foundation
import Synchronization
import Testing
import TestFixtures
import TestSupport

/// Transaction pooling: many cold functions, one database, behind PgBouncer in transaction-pooling mode (Debian's
/// package, started by `scripts/pgbouncer.sh` on a free port). The executable suites also run a second time through a
/// pooler (`scripts/test.sh`); these tests are about what only a pooler shows: a burst far past `max_connections`,
/// session state that must not travel from one client to the next, and how the pooler's own refusals are answered.
///
/// `make test` installs `pgbouncer` and sets `TEST_REQUIRE_PGBOUNCER`; a bare `swift test` without it skips them.
@Suite(
    "behind PgBouncer in transaction mode", .serialized, .timeLimit(.minutes(5)),
    .enabled(if: OwnPgBouncer.isInstalled || ProcessInfo.processInfo.environment["TEST_REQUIRE_PGBOUNCER"] != nil))
struct PoolerTests {
    /// A patient with a session, one linked caregiver with one device, and one medication taken at 07:00.
    struct Home {
        let patient: UUID
        let patientToken: String
        let caregiver: UUID
        let device: String
        let medication: UUID
        let prn: UUID

        func doseEvent() -> Data {
            let body =
                #"{"medicationId":"\#(medication.uuidString.lowercased())","scheduledAt":"\#(TokyoDay.instant(TokyoDay.offset(-1), "07:00"))"}"#
            return makeEvent(path: "/api/dose-records", bearer: patientToken, body: body)
        }
    }

    static func homes(_ count: Int, connection: PostgresConnection, medicationName: String) throws -> [Home] {
        try (0..<count).map { _ in
            let patient = try Seed.patient(connection, displayName: "佐藤")
            let caregiver = UUID()
            try Seed.link(connection, caregiver: caregiver, patient: patient)
            let device = makeDeviceToken()
            try Seed.registerDevice(device, caregiver: caregiver, connection: connection)
            return Home(
                patient: patient, patientToken: try Seed.session(connection, patient: patient), caregiver: caregiver,
                device: device,
                medication: try Seed.medication(connection, patient: patient, name: medicationName, times: ["07:00"]),
                prn: try Seed.medication(connection, patient: patient, name: medicationName, isPRN: true))
        }
    }

    /// What one invocation of a burst answered.
    struct Answer {
        let exitStatus: Int32
        let status: Int?
        let retryAfter: String?
        let problemType: String?
        let output: String
    }

    /// Starts `events.count` cold `dose-record` processes at the same instant and waits for every one to exit.
    static func burst(_ events: [Data], environment: [String: String]) -> [Answer] {
        _ = TestDatabase.migrated
        let outcome = ProcessBurst.run(
            executable: Executables.binDirectory.appendingPathComponent("dose-record"), environment: environment,
            inputs: events.map { Array($0) })
        return outcome.results.map { result in
            LeakCapture.record(result.standardOutput, source: "dose-record burst stdout")
            LeakCapture.record(result.standardError, source: "dose-record burst stderr")
            let run = Executables.Run(result: result)
            return Answer(
                exitStatus: result.exitStatus, status: run.response?.statusCode,
                retryAfter: run.response?.headers["retry-after"], problemType: run.body?["type"]?.stringValue,
                output: String(decoding: result.standardOutput, as: UTF8.self) + run.stderr)
        }
    }

    /// Per home: whether its dose is stored, and how many messages its device received.
    static func outcome(_ homes: [Home], url: String, fake: FCMFake) throws -> [(stored: Bool, pushes: Int)] {
        let connection = try PostgresConnection(url: url)
        defer { connection.close() }
        let messages = try fake.messages().compactMap { $0["token"]?.stringValue }
        let received = Dictionary(grouping: messages, by: { $0 }).mapValues(\.count)
        return try homes.map { home in
            let stored =
                try connection.query("SELECT count(*) FROM dose_records WHERE patient_id = \(home.patient)").single?
                .decode(Int.self, at: 0) ?? 0
            return (stored == 1, received[home.device] ?? 0)
        }
    }

    @Test(
        "200 concurrent cold dose-records, max_connections 20: through PgBouncer all answered and pushed once; direct, the excess is 503 with Retry-After"
    )
    func burstPastMaxConnections() throws {
        let invocations = 200
        let server = try OwnDatabase(port: try freeLocalPort(), maxConnections: 20)
        defer { server.remove() }
        let bouncer = try OwnPgBouncer(upstreamPort: server.port, poolSize: 8, maxClientConnections: 500)
        defer { bouncer.remove() }
        // FCM answers after 300 ms: a direct invocation keeps its server connection through its post-response
        // push, one behind the pooler holds a server connection only inside a transaction.
        let fake = try FCMFake(delayMilliseconds: 300)
        let marker = "突発秘密\(UUID().uuidString.prefix(6))"
        let (warmUp, pooledHomes, directHomes) = try {
            let connection = try PostgresConnection(url: server.url)
            defer { connection.close() }
            let homes = try Self.homes(2 * invocations + 1, connection: connection, medicationName: marker)
            return (homes[0], Array(homes[1...invocations]), Array(homes[(invocations + 1)...]))
        }()
        // One invocation first mints the shared FCM token, so that both bursts start with the same cache.
        let first = try Executables.run(
            "dose-record", input: warmUp.doseEvent(),
            environment: fake.environment(["DATABASE_URL": TestDatabase.runtimeURL(for: server.url)]))
        try #require(first.response?.statusCode == 200)

        let pooled = Self.burst(
            pooledHomes.map { $0.doseEvent() },
            environment: fake.environment(["DATABASE_URL": TestDatabase.runtimeURL(for: bouncer.url())]))
        let pooledOutcome = try Self.outcome(pooledHomes, url: server.url, fake: fake)
        let stats = try bouncer.stats(database: "caregiver_push")
        let direct = Self.burst(
            directHomes.map { $0.doseEvent() },
            environment: fake.environment(["DATABASE_URL": TestDatabase.runtimeURL(for: server.url)]))
        let directOutcome = try Self.outcome(directHomes, url: server.url, fake: fake)

        func count(_ answers: [Answer]) -> [String: Int] {
            Dictionary(grouping: answers, by: { $0.status.map(String.init) ?? "none" }).mapValues(\.count)
        }
        let pooledPushedOnce = pooledOutcome.filter { $0.stored && $0.pushes == 1 }.count
        let directAnswered = zip(direct, directOutcome).filter { $0.0.status == 200 }
        let directRefused = zip(direct, directOutcome).filter { $0.0.status == 503 }
        print(
            "pooler burst: \(invocations) cold dose-records at once, max_connections 20 — through PgBouncer "
                + "(default_pool_size \(bouncer.poolSize)): \(count(pooled)), doses stored and pushed once "
                + "\(pooledPushedOnce), transactions \(stats["total_xact_count"] ?? -1), clients' total wait for a "
                + "server connection \((stats["total_wait_time"] ?? 0) / 1000) ms; direct: \(count(direct)), "
                + "doses stored \(directOutcome.filter(\.stored).count), pushed once "
                + "\(directOutcome.filter { $0.stored && $0.pushes == 1 }.count)")

        // Through the pooler: every one answered 200, stored, and pushed exactly once.
        #expect(pooled.allSatisfy { $0.exitStatus == 0 && $0.status == 200 }, "through PgBouncer: \(count(pooled))")
        #expect(pooledPushedOnce == invocations)
        // Directly: the excess is refused with a 503 problem and Retry-After; nothing crashes, nothing is lost.
        #expect(direct.allSatisfy { $0.exitStatus == 0 }, "a direct invocation did not exit 0")
        #expect(directAnswered.count + directRefused.count == invocations, "direct: \(count(direct))")
        #expect(!directRefused.isEmpty, "max_connections 20 refused none of \(invocations) concurrent invocations")
        #expect(!directAnswered.isEmpty)
        for (answer, _) in directRefused {
            #expect(answer.retryAfter != nil && answer.problemType == "/problems/unavailable")
        }
        // An answered dose is stored and pushed exactly once; a refused one is neither (the client retries it).
        #expect(directAnswered.allSatisfy { $0.1.stored && $0.1.pushes == 1 })
        #expect(directRefused.allSatisfy { !$0.1.stored && $0.1.pushes == 0 })
        // Nothing of the medication or the device tokens reached an answer or a log line.
        let said = (pooled + direct).map(\.output).joined()
        #expect(!said.contains(marker))
        #expect(!(pooledHomes + directHomes).contains { said.contains($0.device) })
    }

    /// The server session state a pooled client can see: settings and anything else that outlives a transaction.
    struct SessionState: Equatable, CustomStringConvertible {
        let backend: Int
        let statementTimeout: String
        let lockTimeout: String
        let idleInTransactionTimeout: String
        /// Named prepared statements, LISTEN channels, advisory locks, holdable cursors, temporary schema.
        let leftovers: [Int]

        static func read(_ connection: PostgresConnection) throws -> SessionState {
            let row = try #require(
                try connection.query(
                    """
                    SELECT pg_backend_pid(), current_setting('statement_timeout'), current_setting('lock_timeout'),
                           current_setting('idle_in_transaction_session_timeout'),
                           (SELECT count(*) FROM pg_prepared_statements)::int,
                           (SELECT count(*) FROM pg_listening_channels())::int,
                           (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())::int,
                           (SELECT count(*) FROM pg_cursors WHERE is_holdable)::int,
                           (pg_my_temp_schema() <> 0)::int
                    """
                ).single)
            let (backend, statement, lock, idle) = try row.decode((Int, String, String, String).self)
            return SessionState(
                backend: backend, statementTimeout: statement, lockTimeout: lock, idleInTransactionTimeout: idle,
                leftovers: try (4...8).map { try row.decode(Int.self, at: $0) })
        }

        var description: String {
            "backend \(backend): statement_timeout \(statementTimeout), lock_timeout \(lockTimeout), "
                + "idle_in_transaction_session_timeout \(idleInTransactionTimeout), leftovers \(leftovers)"
        }
    }

    @Test("a function's timeouts never show up in another client's session through the pool")
    func noSettingsLeak() throws {
        let database = try IsolatedDatabase()
        // One server connection for every client: each function's transactions and every probe share one session.
        let bouncer = try OwnPgBouncer(upstreamPort: TestDatabase.directPort, poolSize: 1)
        defer { bouncer.remove() }
        let pooled = bouncer.url(database: database.name)
        let config = Dictionary(try bouncer.admin("SHOW CONFIG").map { ($0[0], $0.count > 1 ? $0[1] : "") }) { a, _ in a
        }
        #expect(config["pool_mode"] == "transaction" && config["default_pool_size"] == "1")
        let fake = try FCMFake()
        let home = try database.with { try Self.homes(1, connection: $0, medicationName: "漏洩秘密")[0] }
        let probe = try PostgresConnection(url: pooled, applicationName: "caregiver-push-probe")
        defer { probe.close() }
        let before = try SessionState.read(probe)
        try #require(before.leftovers.allSatisfy { $0 == 0 }, "\(before)")

        // While the functions run, another client keeps reading the one server session between their transactions.
        let samples = Mutex<[SessionState]>([])
        let stop = Atomic<Bool>(false)
        let sampling = DispatchGroup()
        sampling.enter()
        Thread.detachNewThread {
            defer { sampling.leave() }
            guard let sampler = try? PostgresConnection(url: pooled, applicationName: "caregiver-push-probe") else {
                return
            }
            defer { sampler.close() }
            while !stop.load(ordering: .relaxed) {
                if let state = try? SessionState.read(sampler) { samples.withLock { $0.append(state) } }
                Thread.sleep(forTimeInterval: 0.002)
            }
        }
        // Bounds no server default has, so that a leak cannot pass for a default; the mint's own, longer lock
        // timeout (set_config(…, true)) is exercised by the first push (this fake's token cache is empty).
        let environment = fake.environment([
            "DATABASE_URL": pooled, "DATABASE_LOCK_TIMEOUT_MS": "1234", "DATABASE_STATEMENT_TIMEOUT_MS": "4321",
        ])
        let caregiverToken = try caregiverToken(home.caregiver)
        let registered = makeDeviceToken()
        let runs: [(String, Data)] = [
            (
                "push-register",
                try Executables.fixture(
                    "push-register/valid.json",
                    ["CAREGIVER_TOKEN": caregiverToken, "DEVICE_TOKEN": registered, "INSTALLATION_ID": "leak"])
            ),
            ("dose-record", home.doseEvent()),
            (
                "slot-bulk-record",
                makeEvent(
                    path: "/api/dose-records/slot", bearer: home.patientToken,
                    body: #"{"date":"\#(TokyoDay.offset(-2))","slot":"morning"}"#)
            ),
            (
                "prn-record",
                try Executables.fixture(
                    "prn-record/patient.json",
                    [
                        "PATIENT_TOKEN": home.patientToken, "MEDICATION_ID": home.prn.uuidString.lowercased(),
                        "IDEMPOTENCY_KEY": UUID().uuidString,
                    ])
            ),
            (
                "push-unregister",
                try Executables.fixture(
                    "push-unregister/valid.json", ["CAREGIVER_TOKEN": caregiverToken, "DEVICE_TOKEN": registered])
            ),
            ("push-sweep", Data("{}".utf8)),
        ]
        // Every function that runs at request or schedule time (db-migrate runs below, as the runner's migrate).
        let table = try FunctionTable(contentsOf: Repository.root.appendingPathComponent("infra/functions.json"))
        #expect(Set(runs.map(\.0)) == Set(table.functions.filter { $0.deploy == nil }.map(\.name)))
        var statuses: [String: Int] = [:]
        for (function, event) in runs {
            let run = try Executables.run(function, input: event, environment: environment)
            if function == "push-sweep" {
                // A scheduled function answers with its summary, not an HTTP response.
                let summary = try? JSONValue.parse(run.result.standardOutput)
                statuses[function] = summary?["sent"] != nil && summary?["stoppedEarly"] == nil ? 200 : -1
            } else {
                statuses[function] = run.response?.statusCode ?? -1
            }
        }
        let migrate = try Executables.run(
            "runner", arguments: ["migrate", "--migrations", TestDatabase.migrationsDirectory.path], input: Data(),
            environment: environment)
        stop.store(true, ordering: .relaxed)
        sampling.wait()

        #expect(statuses.values.allSatisfy { $0 == 200 }, "\(statuses)")
        #expect(migrate.result.exitStatus == 0)
        #expect(try fake.messages(to: [home.device]).count >= 2, "the recordings' pushes went through the pool")
        let after = try SessionState.read(probe)
        #expect(after == before, "before: \(before); after: \(after)")
        let seen = samples.withLock { $0 }
        print(
            "settings leak: \(seen.count) probes of the one pooled server session while 6 functions and a migration ran"
        )
        #expect(seen.count > 10)
        let strays = seen.filter { $0 != before }
        #expect(strays.isEmpty, "another client saw: \(strays.prefix(3))")

        // The probe can see a leak: a session-level SET (what the functions never send) stays on the pooled session.
        let careless = try PostgresConnection(url: pooled, applicationName: "caregiver-push-careless")
        defer { careless.close() }
        try careless.query("SET statement_timeout = 4321")
        #expect(try SessionState.read(probe).statementTimeout == "4321ms")
        try careless.query("RESET ALL")
        #expect(try SessionState.read(probe) == before)
    }

    @Test("a patient-session lookup stuck behind a lock is a 503 after DATABASE_LOCK_TIMEOUT_MS, not a hang")
    func sessionLookupIsBounded() throws {
        let database = try IsolatedDatabase()
        let home = try database.with { try Self.homes(1, connection: $0, medicationName: "待機秘密")[0] }
        // What a migration altering patient_sessions would hold.
        let holder = try LockHolder(url: database.url)
        try holder.connection.query("LOCK TABLE patient_sessions IN ACCESS EXCLUSIVE MODE")
        let answered = DispatchSemaphore(value: 0)
        let result = Mutex<Executables.Run?>(nil)
        let environment = testEnvironment([
            "DATABASE_URL": TestDatabase.runtimeURL(for: database.url), "DATABASE_LOCK_TIMEOUT_MS": "300",
        ])
        Thread.detachNewThread {
            let run = try? Executables.run("dose-record", input: home.doseEvent(), environment: environment)
            result.withLock { $0 = run }
            answered.signal()
        }
        let inTime = answered.wait(timeout: .now() + 30) == .success
        holder.release()
        if !inTime { answered.wait() }
        #expect(inTime, "the lookup waited for the lock holder")
        let run = try #require(result.withLock { $0 })
        #expect(run.response?.statusCode == 503)
        #expect(run.response?.headers["retry-after"] != nil)
        #expect(run.stderr.contains(#""db.sqlstate":"55P03""#))
    }

    @Test("PgBouncer's refusals: max_client_conn and query_wait_timeout are 503 with Retry-After; options= is a 500")
    func poolerRefusals() throws {
        let event = try Executables.fixture(
            "push-register/valid.json",
            ["CAREGIVER_TOKEN": try caregiverToken(UUID()), "DEVICE_TOKEN": makeDeviceToken(), "INSTALLATION_ID": "r"])
        // max_client_conn 2, both taken by idle clients: PgBouncer refuses the function's connection.
        let full = try OwnPgBouncer(upstreamPort: TestDatabase.directPort, poolSize: 2, maxClientConnections: 2)
        defer { full.remove() }
        let idle = try (0..<2).map { _ in try PostgresConnection(url: full.url()) }
        let refused = try Executables.run(
            "push-register", input: event,
            environment: testEnvironment(["DATABASE_URL": TestDatabase.runtimeURL(for: full.url())]))
        idle.forEach { $0.close() }
        #expect(refused.result.exitStatus == 0)
        #expect(refused.response?.statusCode == 503 && refused.response?.headers["retry-after"] != nil)
        #expect(refused.body?["type"] == .string("/problems/unavailable"))

        // One server connection, held in a transaction by another client: the function's first transaction waits
        // in PgBouncer's queue until query_wait_timeout, and PgBouncer ends it.
        let busy = try OwnPgBouncer(upstreamPort: TestDatabase.directPort, poolSize: 1, queryWaitTimeoutSeconds: 1)
        defer { busy.remove() }
        let holder = try LockHolder(url: TestDatabase.runtimeURL(for: busy.url()))
        let waited = try Executables.run(
            "push-register", input: event,
            environment: testEnvironment(["DATABASE_URL": TestDatabase.runtimeURL(for: busy.url())]))
        holder.release()
        #expect(waited.result.exitStatus == 0)
        #expect(waited.response?.statusCode == 503 && waited.response?.headers["retry-after"] != nil)

        // A startup parameter PgBouncer does not accept: no retry will help, so it is a misconfiguration.
        let options = try Executables.run(
            "push-register", input: event,
            environment: testEnvironment([
                "DATABASE_URL": TestDatabase.runtimeURL(for: busy.url()) + "?options=-c%20statement_timeout%3D1000"
            ]))
        #expect(options.result.exitStatus == 0)
        #expect(options.response?.statusCode == 500)
        #expect(options.stderr.contains(#""config.variable":"DATABASE_URL""#))
        #expect(options.response?.body.contains("options") == false)
    }
}

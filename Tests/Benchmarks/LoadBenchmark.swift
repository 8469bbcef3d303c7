import Codecs
import Curl
import Libpq
import OpenSSLCrypto
import Migrations
import CaregiverPush
import Foundation
import Synchronization
import TestFixtures
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// The whole recording under a steady stream of them, measured from outside: the production host (`gateway serve`
/// with the container image's options and the deployment's function environment, release build) in front of the
/// shipped functions, a durable PostgreSQL with `pg_stat_statements`, an FCM stand-in behind nghttpx (TLS, HTTP/2)
/// that answers 503 to one first attempt in ten, push-sweep run every minute as the deployment's CronJob runs it, and
/// an open-loop client (`c/loadgen.c`) recording doses, slots and PRNs (2:1:1) for a set of households.
///
/// Per rate: the achieved rate, the HTTP latency from each request's intended send time (so a stall counts against
/// every request it delayed: no coordinated omission), time to push (the recording's answer to the stand-in
/// accepting each delivery), misses and duplicates against what every recording owes, CPU per recording by process
/// group, and PostgreSQL's statements by total time.
struct LoadBenchmark {
    struct Options {
        /// The last two go beyond the goal's 300, toward and past what two cores carry: where the host sheds (503 with
        /// `Retry-After`), the run after it shows that it recovered; the highest rate carried is the capacity.
        var rates: [Int] = [20, 50, 100, 200, 300, 500, 700]
        var seconds = 20.0
        /// The rate run once more with `Retry-After: 1` on the stand-in's 503s; `nil`: not run.
        var retryAfterRate: Int? = 100
        var households = 200
        var devices = 629
        /// One first attempt in this many is answered 503.
        var failFirstEvery = 10
        var sweepIntervalSeconds = 60.0
        /// How long after the last answer the run waits for pushes still owed (a sweep interval and some).
        var settleLimitSeconds = 75.0
        /// Settings that replace the deployment's for this run (`BENCH_LOAD_SETTINGS=NAME=value,…`), for measuring a
        /// lever the deployment does not pull (`DATABASE_PREPARED_STATEMENTS=on`: a direct connection).
        var settings: [String: String] = [:]
        /// `BENCH_LOAD_NESTED=1`: the statements table also counts the statements run inside the PL/pgSQL calls
        /// (`pg_stat_statements.track = all`), to say where a call's time goes. A diagnosis, not a measurement:
        /// tracking them costs PostgreSQL time of its own.
        var nestedStatements = false

        init(environment: [String: String]) {
            if let rates = environment["BENCH_LOAD_RATES"] {
                self.rates = rates.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            }
            if let seconds = environment["BENCH_LOAD_SECONDS"].flatMap(Double.init) { self.seconds = seconds }
            if let rate = environment["BENCH_LOAD_RETRY_AFTER_RATE"].flatMap(Int.init) {
                retryAfterRate = rate > 0 ? rate : nil
            }
            if let households = environment["BENCH_LOAD_HOUSEHOLDS"].flatMap(Int.init) { self.households = households }
            if let devices = environment["BENCH_LOAD_DEVICES"].flatMap(Int.init) { self.devices = devices }
            nestedStatements = environment["BENCH_LOAD_NESTED"] == "1"
            for pair in (environment["BENCH_LOAD_SETTINGS"] ?? "").split(separator: ",") {
                let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
                if parts.count == 2 { settings[parts[0]] = parts[1] }
            }
        }
    }

    /// One statement of `pg_stat_statements`, as the functions' role ran it during a run.
    struct Statement {
        let calls: Int
        let totalMilliseconds: Double
        let meanMilliseconds: Double
        let planMilliseconds: Double
        /// How many times it was planned: a statement sent unnamed, at every call; one inside a PL/pgSQL call, once
        /// per server session and after each invalidation.
        let plans: Int
        /// Sent by the functions, not run inside one of their PL/pgSQL calls (only `BENCH_LOAD_NESTED=1` counts those).
        let topLevel: Bool
        let rows: Int
        let query: String
    }

    /// CPU milliseconds by process group over one run.
    struct CPU {
        /// The gateway's process tree: the gateway and its function workers.
        var gateway = 0.0
        /// Of which the function workers (the gateway's descendants, the exited ones included).
        var functions = 0.0
        var postgres = 0.0
        var sweep = 0.0
        var loadGenerator = 0.0
        var standIn = 0.0
        var nghttpx = 0.0
        /// Every process on the machine (/proc/stat), ours and anyone else's.
        var machine = 0.0
        var wallMilliseconds = 0.0
    }

    struct Run {
        let targetRate: Int
        let retryAfter: Bool
        let scheduled: Int
        var answered = 0
        var succeeded = 0
        var unavailable = 0
        var otherStatus = 0
        var unanswered = 0
        var achievedRate = 0.0
        var httpP50 = 0.0
        var httpP99 = 0.0
        var httpMax = 0.0
        /// The 99th percentile of the answers 200 alone: what the host took on, shed load apart.
        var acceptedP99 = 0.0
        var pushP50 = 0.0
        var pushP99 = 0.0
        var pushMax = 0.0
        var owed = 0
        var delivered = 0
        var misses = 0
        var duplicates = 0
        var unexpected = 0
        var injectedFailures = 0
        var standInSends = 0
        var sweepRuns = 0
        var settleSeconds = 0.0
        var connections = 0
        var cpu = CPU()
        var statements: [Statement] = []
    }

    let databaseURL: String
    let gateway: String
    let functionDirectory: URL
    let loadGenerator: String
    let peakResidentHelper: String?
    let options: Options

    // MARK: the households

    /// A household of the load: a patient with a session, two linked caregivers with one or two devices each, four
    /// scheduled medications (07:00 and 08:00 in the morning, noon, bedtime) and one as-needed.
    struct Household {
        struct Caregiver {
            let id: UUID
            let jwt: String
            let tokens: [String]
        }

        let patient: String
        let patientToken: String
        let caregivers: [Caregiver]
        /// The medication a single dose of each slot records: morning 07:00, noon 12:00, bedtime 21:00.
        let single: [(medication: String, slot: String, time: String)]
        let prn: String
        /// The client address the gateway sees (X-Forwarded-For from a trusted proxy): one per household, as phones
        /// of different homes are different clients.
        let clientAddress: String
        /// (date, slot) pairs already given to a recording of this run: each recording records a new event.
        var used = 0
    }

    /// Seeds `count` households with `devices` devices in all (each household 3 or 4), on one connection with
    /// `synchronous_commit` off for the seeding only (the functions' connections keep the default).
    static func seed(url: String, count: Int, devices: Int, addressBase: Int) throws -> [Household] {
        let connection = try PostgresConnection(url: url, applicationName: "caregiver-push-bench")
        defer { connection.close() }
        try connection.query("SET synchronous_commit = off")
        let extra = max(0, min(count, devices - 3 * count))
        return try (0..<count).map { index in
            let patient = try Seed.patient(connection, displayName: "負荷")
            var caregivers: [Household.Caregiver] = []
            for deviceCount in [2, index < extra ? 2 : 1] {
                let id = UUID()
                try Seed.link(connection, caregiver: id, patient: patient)
                let tokens = (0..<deviceCount).map { _ in makeDeviceToken() }
                for token in tokens { try Seed.registerDevice(token, caregiver: id, connection: connection) }
                caregivers.append(.init(id: id, jwt: try caregiverToken(id, expiresIn: 7200), tokens: tokens))
            }
            let morning = try Seed.medication(connection, patient: patient, name: "負荷薬0", times: ["07:00"])
            try Seed.medication(connection, patient: patient, name: "負荷薬1", times: ["08:00"])
            let noon = try Seed.medication(connection, patient: patient, name: "負荷薬2", times: ["12:00"])
            let bedtime = try Seed.medication(connection, patient: patient, name: "負荷薬3", times: ["21:00"])
            let prn = try Seed.medication(connection, patient: patient, name: "負荷頓服", isPRN: true)
            let address = addressBase + index
            return Household(
                patient: patient.uuidString.lowercased(),
                patientToken: try Seed.session(connection, patient: patient, expiresIn: 7200), caregivers: caregivers,
                single: [
                    (morning.uuidString.lowercased(), "morning", "07:00"),
                    (noon.uuidString.lowercased(), "noon", "12:00"),
                    (bedtime.uuidString.lowercased(), "bedtime", "21:00"),
                ],
                prn: prn.uuidString.lowercased(),
                clientAddress: "198.51.\(100 + address / 250 % 100).\(address % 250 + 1)")
        }
    }

    // MARK: the schedule

    /// One recording of the schedule and what it owes.
    struct Planned {
        enum Kind: String { case dose, slot, prn }

        let kind: Kind
        let household: Int
        /// The caregiver who records it (their devices are owed nothing), `nil`: the patient.
        let actor: UUID?
        /// The dose's Tokyo date and slot (dose and slot recordings).
        let date: String
        let slot: String
    }

    /// The schedule's lines for `loadgen` and what each line is: `rate` recordings a second for `seconds`, evenly
    /// spaced, kinds in the order dose, slot, dose (by a caregiver), PRN, households drawn by a fixed generator.
    static func schedule(rate: Int, seconds: Double, households: inout [Household]) -> (
        lines: [String], plan: [Planned]
    ) {
        let count = Int(Double(rate) * seconds)
        var generator = SplitMix(seed: UInt64(rate))
        var lines: [String] = []
        var plan: [Planned] = []
        lines.reserveCapacity(count)
        let slots = ["morning", "noon", "bedtime"]
        for index in 0..<count {
            let offset = 200_000 + Int64(index) * 1_000_000 / Int64(rate)
            let which = Int(generator.next() % UInt64(households.count))
            var household = households[which]
            let kinds: [Planned.Kind] = [.dose, .slot, .dose, .prn]
            let kind = kinds[index % 4]
            var bearer = household.patientToken
            var actor: UUID?
            var key = "-"
            var date = ""
            var slot = ""
            let path: String
            let body: String
            switch kind {
            case .dose, .slot:
                // A (date, slot) of its own for every dose and slot recording of the household: each owes a new event.
                let position = household.used
                household.used += 1
                date = TokyoDay.offset(-(1 + position / slots.count))
                slot = slots[position % slots.count]
                if kind == .dose {
                    let single = household.single[position % slots.count]
                    let scheduledAt = TokyoDay.instant(date, single.time)
                    let dose = #""medicationId":"\#(single.medication)","scheduledAt":"\#(scheduledAt)""#
                    if index % 4 == 2 {
                        let caregiver = household.caregivers[index / 4 % household.caregivers.count]
                        actor = caregiver.id
                        bearer = caregiver.jwt
                        body = #"{"patientId":"\#(household.patient)","# + dose + "}"
                    } else {
                        body = "{" + dose + "}"
                    }
                    path = "/api/dose-records"
                } else {
                    body = #"{"date":"\#(date)","slot":"\#(slot)"}"#
                    path = "/api/dose-records/slot"
                }
            case .prn:
                key = UUID().uuidString.lowercased()
                body = #"{"medicationId":"\#(household.prn)","quantity":1}"#
                path = "/api/prn-dose-records"
            }
            households[which] = household
            lines.append([String(offset), path, household.clientAddress, bearer, key, body].joined(separator: "\t"))
            plan.append(Planned(kind: kind, household: which, actor: actor, date: date, slot: slot))
        }
        return (lines, plan)
    }

    /// A small fixed generator (the schedule is the same from run to run).
    struct SplitMix {
        var state: UInt64
        init(seed: UInt64) { state = seed &+ 0x9E37_79B9_7F4A_7C15 }
        mutating func next() -> UInt64 {
            state = state &+ 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    // MARK: running

    func run() throws -> [Run] {
        let setup = try PostgresConnection(url: databaseURL, applicationName: "caregiver-push-bench")
        defer { setup.close() }
        try Migrator(directory: URL(fileURLWithPath: "infra/migrations")).migrate(setup, logger: .init(label: "bench"))
        try setup.query(PostgresQuery(unsafeSQL: "ALTER ROLE \(Migrator.runtimeRole) LOGIN"))
        try setup.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        try setup.query(
            PostgresQuery(
                unsafeSQL: "ALTER SYSTEM SET pg_stat_statements.track = '\(options.nestedStatements ? "all" : "top")'"))
        try setup.query("SELECT pg_reload_conf()")
        let backend = try setup.query("SELECT pg_backend_pid()")[0].decode(Int.self, at: 0)
        let postmaster = Self.parent(of: pid_t(backend))

        let standIn = try EmulatorProcess(
            delayMilliseconds: 0, tls: false, failFirstEvery: options.failFirstEvery, retryAfterSeconds: nil)
        let front = try Nghttpx(backendPort: standIn.port)
        let port = try freeLocalPort()
        let runtimeURL = TestDatabase.runtimeURL(for: databaseURL)
        // What infra/knative/service.yaml gives the container (the deployment's values), with the bench's database,
        // stand-in and key: the functions inherit it from the gateway.
        var environment = try Self.deploymentEnvironment()
        environment.merge(options.settings) { _, chosen in chosen }
        environment["DATABASE_URL"] = runtimeURL
        environment["SUPABASE_JWT_SECRET"] = testJWTSecret
        environment["FCM_SERVICE_ACCOUNT_JSON"] = Data(standIn.serviceAccountJSON.utf8).base64EncodedString()
        environment["FCM_API_BASE_URL"] = front.baseURL
        environment["SSL_CERT_FILE"] = front.certificateFile
        environment["PATH"] = "/usr/bin:/bin"
        // The image's entrypoint line (infra/docker/Dockerfile), on loopback and a free port.
        let host = try Spawn.start(
            executable: gateway,
            arguments: [
                "serve", "--host", "127.0.0.1", "--port", String(port), "--mode", "warm", "--no-schedules",
                "--max-body", "16384", "--max-connections-per-client", "512", "--max-requests-per-client", "16",
                "--client-address-header", "x-forwarded-for", "--trusted-proxy", Self.trustedProxies, "--bin-dir",
                functionDirectory.path, "--functions", "infra/functions.json",
            ], environment: environment)
        defer { host.stop(signal: SIGTERM) }
        guard
            eventually(
                seconds: 30,
                {
                    if case .success(let answer) = CurlClient.perform(
                        CurlRequest(url: "http://127.0.0.1:\(port)/healthz"), timeoutMilliseconds: 1000)
                    {
                        answer.status == 200
                    } else {
                        false
                    }
                })
        else { throw BenchmarkError("the gateway did not answer /healthz") }

        // push-sweep every minute from the section's start (the first at once), as the deployment's CronJob runs it.
        let cron = SweepCron(
            executable: functionDirectory.appendingPathComponent("push-sweep").path, environment: environment,
            peakResidentHelper: peakResidentHelper, interval: options.sweepIntervalSeconds)
        cron.start()
        defer { cron.stop() }

        // Warm-up: the workers start, the access token is minted; not reported.
        var addressBase = 0
        var warmHouseholds = try Self.seed(url: databaseURL, count: 20, devices: 60, addressBase: 5000)
        let warm = Self.schedule(rate: 50, seconds: 3, households: &warmHouseholds)
        _ = try drive(lines: warm.lines, port: port)

        var runs: [Run] = []
        var plannedRuns = options.rates.map { ($0, false) }
        if let rate = options.retryAfterRate { plannedRuns.append((rate, true)) }
        for (rate, retryAfter) in plannedRuns {
            standIn.failFirstAttempts(every: options.failFirstEvery, retryAfterSeconds: retryAfter ? 1 : nil)
            var households = try Self.seed(
                url: databaseURL, count: options.households, devices: options.devices, addressBase: addressBase)
            addressBase += options.households
            let (lines, plan) = Self.schedule(rate: rate, seconds: options.seconds, households: &households)
            _ = settle(setup, standIn: standIn, limit: 5)
            // The planner's statistics as a server in service has them (autovacuum's analyze keeps them): the
            // households just seeded grew the tables many times over, faster than autovacuum looks.
            try setup.query("ANALYZE")
            standIn.forgetRequests()
            try setup.query("SELECT pg_stat_statements_reset()")
            let before = snapshot(
                gateway: host.pid, postmaster: postmaster, bench: pid_t(backend), standIn: standIn,
                front: front)
            let sweepsBefore = cron.runs.count
            let sweepCPUBefore = cron.cpuMilliseconds()
            let results = try drive(lines: lines, port: port)
            let settled = settle(setup, standIn: standIn, limit: options.settleLimitSeconds)
            let after = snapshot(
                gateway: host.pid, postmaster: postmaster, bench: pid_t(backend), standIn: standIn,
                front: front)
            let sweeps = Array(cron.runs.dropFirst(sweepsBefore))
            var result = Run(targetRate: rate, retryAfter: retryAfter, scheduled: lines.count)
            result.cpu = CPU(
                gateway: after.gateway - before.gateway, functions: after.functions - before.functions,
                postgres: after.postgres - before.postgres,
                sweep: cron.cpuMilliseconds() - sweepCPUBefore, loadGenerator: results.cpuMilliseconds,
                standIn: after.standIn - before.standIn, nghttpx: after.nghttpx - before.nghttpx,
                machine: after.machine - before.machine, wallMilliseconds: after.wall - before.wall)
            result.sweepRuns = sweeps.count
            result.settleSeconds = settled
            result.connections = results.connections
            let sends = try standIn.sends(path: NSTemporaryDirectory() + "bench-load-sends-\(UUID().uuidString)")
            measure(&result, results: results.requests, plan: plan, households: households, sends: sends)
            result.statements = try statements(setup)
            runs.append(result)
            FileHandle.standardError.write(
                Data("bench: load \(rate)/s\(retryAfter ? " (Retry-After: 1)" : ""): \(result.summary)\n".utf8))
        }
        return runs
    }

    /// The container's trusted proxies (infra/docker/Dockerfile's TRUSTED_PROXIES).
    static let trustedProxies =
        "127.0.0.0/8,::1/128,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7"

    /// The functions' settings as the deployment gives them: the plain `- { name: X, value: "Y" }` entries of
    /// infra/knative/push-sweep-cronjob.yaml (the same as the Service's, which Tests/Contract/check_descriptors.py
    /// holds to the code), secrets aside, with this run's stage.
    static func deploymentEnvironment() throws -> [String: String] {
        let text = try String(contentsOfFile: "infra/knative/push-sweep-cronjob.yaml", encoding: .utf8)
        var environment: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix("- { name: "), let comma = trimmed.firstIndex(of: ","),
                let open = trimmed.range(of: "value: \""), let close = trimmed.lastIndex(of: "\"")
            else { continue }
            let name = trimmed[trimmed.index(trimmed.startIndex, offsetBy: 10)..<comma]
            guard open.upperBound <= close else { continue }
            environment[String(name)] = String(trimmed[open.upperBound..<close])
        }
        guard environment["PUSH_SWEEP_STAY"] != nil, environment["PUSH_SEND_DEADLINE_MS"] != nil else {
            throw BenchmarkError("infra/knative/push-sweep-cronjob.yaml: no settings found")
        }
        environment["PUSH_ENVIRONMENT"] = "DEV"
        environment["METRICS_NAMESPACE"] = "CaregiverPush/bench"
        return environment
    }

    /// One request's result as `loadgen` reports it.
    struct Answered {
        let status: Int
        let intended: Int64
        let done: Int64
        let wall: Int64
        let body: String
    }

    /// Runs `loadgen` over the schedule and reads its results.
    private func drive(lines: [String], port: Int) throws -> (
        requests: [Answered], cpuMilliseconds: Double, connections: Int
    ) {
        let directory = NSTemporaryDirectory() + "bench-load-\(UUID().uuidString)"
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let schedule = directory + "/schedule.tsv"
        let results = directory + "/results.tsv"
        try (lines.joined(separator: "\n") + "\n").write(toFile: schedule, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: loadGenerator)
        process.arguments = [String(port), schedule, results, "512"]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw BenchmarkError("loadgen exited \(process.terminationStatus)")
        }
        var requests: [Answered] = []
        var cpu = 0.0
        var connections = 0
        for line in try String(contentsOfFile: results, encoding: .utf8).split(separator: "\n") {
            if line.hasPrefix("# ") {
                for field in line.dropFirst(2).split(separator: " ") {
                    let parts = field.split(separator: "=")
                    guard parts.count == 2, let value = Double(parts[1]) else { continue }
                    if parts[0] == "cpu-us" { cpu = value / 1000 }
                    if parts[0] == "connections" { connections = Int(value) }
                }
                continue
            }
            let fields = line.split(separator: "\t", maxSplits: 7, omittingEmptySubsequences: false)
            guard fields.count >= 7, let status = Int(fields[1]), let intended = Int64(fields[2]),
                let done = Int64(fields[4]), let wall = Int64(fields[5])
            else { continue }
            requests.append(
                Answered(
                    status: status, intended: intended, done: done, wall: wall,
                    body: fields.count > 7 ? String(fields[7]) : ""))
        }
        return (requests, cpu, connections)
    }

    /// Waits until no delivery is owed (PENDING or SENDING) and the stand-in has seen nothing new for a second, or
    /// `limit` seconds; returns how long it waited.
    private func settle(_ connection: PostgresConnection, standIn: EmulatorProcess, limit: Double) -> Double {
        let start = ContinuousClock.now
        var lastCount = -1
        var quietSince = ContinuousClock.now
        while benchMilliseconds(ContinuousClock.now - start) < limit * 1000 {
            let owed =
                (try? connection.query(
                    "SELECT count(*) FROM push_deliveries WHERE status IN ('PENDING', 'SENDING')")[0].decode(
                        Int.self, at: 0)) ?? 0
            let count = standIn.requestCount()
            if count != lastCount {
                lastCount = count
                quietSince = ContinuousClock.now
            }
            if owed == 0 && benchMilliseconds(ContinuousClock.now - quietSince) >= 1000 { break }
            Thread.sleep(forTimeInterval: 0.25)
        }
        return benchMilliseconds(ContinuousClock.now - start) / 1000
    }

    // MARK: CPU

    struct Snapshot {
        let gateway: Double
        let functions: Double
        let postgres: Double
        let standIn: Double
        let nghttpx: Double
        let machine: Double
        let wall: Double
    }

    /// CPU so far: the gateway and its workers; PostgreSQL (the postmaster and every child of it, the bench's own
    /// inspecting backend taken out); the stand-in's process; nghttpx's; the whole machine (/proc/stat).
    private func snapshot(gateway: pid_t, postmaster: pid_t?, bench: pid_t, standIn: EmulatorProcess, front: Nghttpx)
        -> Snapshot
    {
        let host = ProcessTreeCPU.tree(gateway)
        let postgres = postmaster.map { ProcessTreeCPU.tree($0) }
        return Snapshot(
            gateway: host.root + host.descendants, functions: host.descendants,
            postgres: (postgres.map { $0.root + $0.descendants } ?? 0) - ProcessTreeCPU.milliseconds(bench),
            standIn: standIn.processCPUMilliseconds() ?? 0,
            nghttpx: ProcessTreeCPU.tree(front.processIdentifier).root
                + ProcessTreeCPU.tree(front.processIdentifier).descendants,
            machine: Self.machineMilliseconds(), wall: benchMilliseconds(ContinuousClock.now - Self.epoch))
    }

    private static let epoch = ContinuousClock.now

    /// Busy CPU time of the whole machine so far (every core's non-idle jiffies in /proc/stat), in milliseconds.
    static func machineMilliseconds() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("cpu ") })
        else { return 0 }
        let values = line.split(separator: " ").dropFirst().compactMap { Double($0) }
        guard values.count >= 5 else { return 0 }
        // user nice system idle iowait irq softirq steal: busy = all but idle and iowait.
        let busy = values.enumerated().filter { $0.offset != 3 && $0.offset != 4 && $0.offset < 8 }.reduce(0) {
            $0 + $1.element
        }
        return busy * 1000 / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// The parent of a process (the postmaster of a backend).
    static func parent(of pid: pid_t) -> pid_t? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 1 ? pid_t(fields[1]) : nil
    }

    // MARK: the figures

    private func measure(
        _ run: inout Run, results: [Answered], plan: [Planned], households: [Household], sends: [StandInSend]
    ) {
        var latencies: [Double] = []
        var acceptedLatencies: [Double] = []
        var owedAt: [String: (answeredWall: Int64, recipients: Set<String>)] = [:]
        var firstIntended = Int64.max
        var lastDone = Int64.min
        for (index, answer) in results.enumerated() where index < plan.count {
            firstIntended = min(firstIntended, answer.intended)
            guard answer.done > 0 else {
                run.unanswered += 1
                continue
            }
            run.answered += 1
            lastDone = max(lastDone, answer.done)
            latencies.append(Double(answer.done - answer.intended) / 1000)
            switch answer.status {
            case 200:
                run.succeeded += 1
                acceptedLatencies.append(Double(answer.done - answer.intended) / 1000)
            case 503: run.unavailable += 1
            default: run.otherStatus += 1
            }
            guard answer.status == 200, let body = try? JSONValue.parse(Array(answer.body.utf8)),
                (body["updatedCount"]?.integerValue ?? 0) > 0
            else { continue }
            let planned = plan[index]
            let household = households[planned.household]
            let key: String
            switch planned.kind {
            case .dose:
                key = "d|\(household.patient)|\(planned.date)|\(planned.slot)"
            case .slot:
                key = "c|" + Self.collapseID("doseTaken:\(body["recordingGroupId"]?.stringValue ?? "")")
            case .prn:
                key = "c|" + Self.collapseID("doseTaken:prn:\(body["record"]?["id"]?.stringValue ?? "")")
            }
            let recipients = household.caregivers.filter { $0.id != planned.actor }.flatMap(\.tokens)
            owedAt[key] = (answer.wall, Set(recipients))
            run.owed += recipients.count
        }
        if lastDone > firstIntended {
            run.achievedRate = Double(run.succeeded) / (Double(lastDone - firstIntended) / 1e6)
        }
        latencies.sort()
        run.httpP50 = Self.percentile(latencies, 0.50)
        run.httpP99 = Self.percentile(latencies, 0.99)
        run.httpMax = latencies.last ?? 0
        acceptedLatencies.sort()
        run.acceptedP99 = Self.percentile(acceptedLatencies, 0.99)

        run.standInSends = sends.count
        run.injectedFailures = sends.filter { $0.status == 503 }.count
        var accepted: [String: [Int64]] = [:]
        for send in sends where send.status == 200 {
            let collapse = "c|" + send.collapseID
            let key =
                owedAt[collapse] != nil || !send.recordingGroupID.isEmpty
                ? collapse : "d|\(send.patientID)|\(send.date)|\(send.slot)"
            accepted["\(key)|\(send.token)", default: []].append(send.answeredWallMicroseconds)
            guard let owed = owedAt[key], owed.recipients.contains(send.token) else {
                run.unexpected += 1
                continue
            }
        }
        var pushLatencies: [Double] = []
        for (key, owed) in owedAt {
            for token in owed.recipients {
                guard let times = accepted["\(key)|\(token)"], let first = times.min() else {
                    run.misses += 1
                    continue
                }
                run.delivered += 1
                run.duplicates += times.count - 1
                pushLatencies.append(Double(first - owed.answeredWall) / 1000)
            }
        }
        pushLatencies.sort()
        run.pushP50 = Self.percentile(pushLatencies, 0.50)
        run.pushP99 = Self.percentile(pushLatencies, 0.99)
        run.pushMax = pushLatencies.last ?? 0
    }

    /// `DoseTakenEvent`'s collapse id: the first 32 hex digits of SHA-256 of the event key.
    static func collapseID(_ eventKey: String) -> String { SHA256.hexPrefix(of: eventKey, length: 32) }

    /// Nearest-rank percentile of sorted values.
    static func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
        guard !sorted.isEmpty else { return 0 }
        let rank = Int((fraction * Double(sorted.count)).rounded(.up)) - 1
        return sorted[min(max(rank, 0), sorted.count - 1)]
    }

    /// The functions' role's statements since the last reset, by total time (execution and planning), top 10.
    private func statements(_ connection: PostgresConnection) throws -> [Statement] {
        try connection.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT s.calls::bigint, (s.total_exec_time + s.total_plan_time)::float8,
                           ((s.total_exec_time + s.total_plan_time) / greatest(s.calls, 1))::float8,
                           s.total_plan_time::float8, s.plans::bigint, s.toplevel, s.rows::bigint, s.query
                    FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid
                    WHERE r.rolname = '\(Migrator.runtimeRole)'
                    ORDER BY s.total_exec_time + s.total_plan_time DESC LIMIT \(options.nestedStatements ? 20 : 10)
                    """)
        ).map { row in
            Statement(
                calls: try row.decode(Int.self, at: 0), totalMilliseconds: try row.decode(Double.self, at: 1),
                meanMilliseconds: try row.decode(Double.self, at: 2),
                planMilliseconds: try row.decode(Double.self, at: 3), plans: try row.decode(Int.self, at: 4),
                topLevel: try row.decode(Bool.self, at: 5), rows: try row.decode(Int.self, at: 6),
                query: try row.decode(String.self, at: 7))
        }
    }
}

extension LoadBenchmark.Run {
    /// CPU milliseconds per recording answered 200.
    func perRecording(_ milliseconds: Double) -> Double { milliseconds / Double(max(succeeded, 1)) }

    var summary: String {
        String(
            format: "achieved %.1f/s, HTTP p50/p99 %.0f/%.0f ms, %d answered 503, push p50/p99 %.0f/%.0f ms, "
                + "%d misses, %d duplicates, CPU/rec gateway %.2f ms (functions %.2f, push-sweep %.2f), "
                + "PostgreSQL %.2f ms",
            achievedRate, httpP50, httpP99, unavailable, pushP50, pushP99, misses, duplicates,
            perRecording(cpu.gateway + cpu.sweep), perRecording(cpu.functions), perRecording(cpu.sweep),
            perRecording(cpu.postgres))
    }
}

/// push-sweep run every `interval` seconds from `start()` on, the first at once, as the deployment's CronJob runs it
/// (`echo '{}' | push-sweep`, `concurrencyPolicy: Allow`): with the deployment's `PUSH_SWEEP_STAY=on` and 70 s time
/// limit each run stays past the next one's start, so one is always there. A run's CPU is read from its process tree
/// while it runs and from `wait4` (through `c/peak-rss`) once it has ended.
final class SweepCron: Sendable {
    struct Sweep: Sendable {
        let cpuMilliseconds: Double
        let exitStatus: Int32
    }

    private struct State {
        var stopped = false
        var runs: [Sweep] = []
        /// The runs going on: the spawned process (the `peak-rss` helper, push-sweep its child).
        var running: Set<pid_t> = []
        var threads = 0
    }

    private let executable: String
    private let environment: [String: String]
    private let peakResidentHelper: String?
    private let interval: Double
    private let state = Mutex<State>(State())
    private let finished = DispatchSemaphore(value: 0)

    init(executable: String, environment: [String: String], peakResidentHelper: String?, interval: Double) {
        self.executable = executable
        self.environment = environment
        self.peakResidentHelper = peakResidentHelper
        self.interval = interval
    }

    /// The runs that have ended.
    var runs: [Sweep] { state.withLock { $0.runs } }

    /// CPU of every run so far, the ones going on included (so far), in milliseconds: a difference of two readings
    /// is the sweeps' CPU between them.
    func cpuMilliseconds() -> Double {
        let (ended, running) = state.withLock { ($0.runs.reduce(0) { $0 + $1.cpuMilliseconds }, $0.running) }
        return ended
            + running.reduce(0) {
                let tree = ProcessTreeCPU.tree($1)
                return $0 + tree.root + tree.descendants
            }
    }

    func start() {
        state.withLock { $0.threads += 1 }
        Thread.detachNewThread { [self] in
            var next = ContinuousClock.now
            while !state.withLock({ $0.stopped }) {
                if ContinuousClock.now >= next {
                    next = next + .seconds(interval)
                    state.withLock { $0.threads += 1 }
                    Thread.detachNewThread { [self] in
                        runOnce()
                        finished.signal()
                    }
                }
                Thread.sleep(forTimeInterval: 0.2)
            }
            finished.signal()
        }
    }

    private func runOnce() {
        var spawnedPID: pid_t = 0
        let outcome = try? Spawn.run(
            executable: executable, environment: environment, input: Array("{}".utf8),
            peakResidentHelper: peakResidentHelper
        ) { pid in
            spawnedPID = pid
            state.withLock { _ = $0.running.insert(pid) }
        }
        let cpu = outcome?.usage.map { Double($0.userMicroseconds + $0.systemMicroseconds) / 1000 } ?? 0
        state.withLock {
            $0.running.remove(spawnedPID)
            if let outcome { $0.runs.append(Sweep(cpuMilliseconds: cpu, exitStatus: outcome.exitStatus)) }
        }
    }

    /// Stops starting runs, and waits for the ones going on to end (each within its time limit).
    func stop() {
        let threads = state.withLock {
            $0.stopped = true
            return $0.threads
        }
        for _ in 0..<threads { finished.wait() }
    }
}

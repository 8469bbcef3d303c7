import Codecs
import Libpq
import FunctionRuntime
import ProcessSupervision
import TestSupport
import CaregiverPush
import Foundation
import Logging

/// The two costs of durable push (the outbox and the sweep), each as a ratio to a baseline of the same run:
/// - the outbox in the recording transaction: `dose-record`'s time to response with 1 and 10 recipient devices,
///   against a patient with none;
/// - `push-sweep` throughput over due deliveries, against one recording's fan-out to as many devices.
struct DurablePushBenchmark {
    let binDirectory: URL
    let databaseURL: String
    let secret = String(repeating: "d", count: 40)

    private func environment(_ emulator: any FCMStandIn, _ extra: [String: String] = [:]) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["DATABASE_URL"] = databaseURL
        environment["SUPABASE_JWT_SECRET"] = secret
        environment["PUSH_ENVIRONMENT"] = "DEV"
        environment["LOG_LEVEL"] = "warning"
        environment.merge(emulator.environment) { _, new in new }
        environment.merge(extra) { _, new in new }
        return environment
    }

    private func household(devices: Int, connection: PostgresConnection) throws -> (
        patient: UUID, session: String, medication: UUID
    ) {
        try BenchSeed.household(devices: devices, connection: connection)
    }

    private func doseEvent(session: String, medication: UUID, day: Int) throws -> Data {
        let date = TokyoClock.dateString(of: Date(timeIntervalSince1970: 1_735_689_600 + Double(day) * 86_400))
        let body = #"{"medicationId":"\#(medication.uuidString)","scheduledAt":"\#(date)T08:00:00+09:00"}"#
        return try BenchSeed.post("/api/dose-records", bearer: session, body: body)
    }

    struct OutboxRow {
        let devices: Int
        let medianMilliseconds: Double
    }

    /// `dose-record` to stdout's EOF, for patients whose caregivers have 0, 1 and 10 devices, interleaved run by run so
    /// the machine's noise falls on all three alike. Each run records a new dose (a new day), so each one writes its
    /// outbox rows; the push itself comes after the EOF and is not timed.
    func outboxCost(runs: Int, deviceCounts: [Int] = [0, 1, 10]) throws -> [OutboxRow] {
        let emulator = try InProcessEmulator.start(delayMilliseconds: 0)
        let connection = try PostgresConnection(url: databaseURL)
        let homes = try deviceCounts.map { try household(devices: $0, connection: connection) }
        connection.close()
        let environment = environment(emulator)
        var samples = deviceCounts.map { _ in [Double]() }
        for run in 0...runs {
            for (index, home) in homes.enumerated() {
                let event = try doseEvent(session: home.session, medication: home.medication, day: run)
                let start = ContinuousClock.now
                let result = try ChildProcess.run(
                    executable: binDirectory.appendingPathComponent("dose-record"), environment: environment,
                    input: event)
                guard result.exitStatus == 0,
                    let response = try? JSONValue.parse(result.standardOutput), response["statusCode"] == .number(200)
                else { throw BenchmarkError("dose-record did not answer 200") }
                // The first round is a warm-up (the access token is minted then).
                if run > 0 { samples[index].append(milliseconds(result.standardOutputClosedAt - start)) }
            }
        }
        return zip(deviceCounts, samples).map { OutboxRow(devices: $0, medianMilliseconds: median($1)) }
    }

    struct SweepResult {
        let deliveries: Int
        /// Deliveries per second of one dispatch fanning out to every device (the baseline).
        let fanOutPerSecond: Double
        /// Deliveries per second of one `push-sweep` process over the same number of due deliveries.
        let sweepPerSecond: Double
        let sweepBatches: Int
        let rounds: Int
        /// Where the last sweep round's time went: the sweep's own CPU, this process's, and how busy the machine's
        /// cores were, against the round's wall time.
        let sweepCPU: CPUShare
        /// The FCM stand-in's CPU in the last sweep round (its own process).
        let standInMilliseconds: Double
    }

    /// One recording's fan-out to `deliveries` devices (in-process, as its post-response work runs), then a
    /// `push-sweep` process over an event owing the same devices, alternately `rounds` times; medians of each.
    func sweepVersusFanOut(deliveries: Int, delayMilliseconds: Int, rounds: Int) throws -> SweepResult {
        // The emulator in a process of its own, its CPU read apart from the sweep's and this process's.
        let emulator = try EmulatorProcess(delayMilliseconds: delayMilliseconds)
        let extra = ["PUSH_SEND_DEADLINE_MS": "120000", "PUSH_SWEEP_TIME_LIMIT_MS": "600000"]
        let configuration = Configuration(environment: environment(emulator, extra))
        var quiet = Logger(label: "bench")
        quiet.logLevel = .error
        let database = DatabaseSession(configuration: configuration)
        defer { database.close() }
        // What earlier sections or the fan-out here left owed (a fan-out's sends that failed in transit go back to the
        // queue, for the sweep) is not the backlog: ended, so that each sweep here sends exactly the backlog it is
        // timed on.
        func endLeftovers() throws {
            _ = try database.withTransaction { connection in
                try connection.query(
                    """
                    UPDATE caregiver_push.push_deliveries SET status = 'FAILED', last_error = 'bench: left by an earlier run',
                        lease_until = NULL, lease_token = NULL
                    WHERE status IN ('PENDING', 'SENDING')
                    """)
            }
        }
        try endLeftovers()
        let home = try household(devices: deliveries, connection: database.connection())
        let push = PushResources(configuration: configuration)
        let dispatcher = PushDispatcher(configuration: configuration, logger: quiet)
        func owe() throws -> String {
            let event = DoseTakenEvent(
                patientID: AppID(home.patient), date: "2026-02-11", slot: .morning, recordingGroupID: AppID(UUID()),
                takenAt: Date(),
                withinTime: true, actingCaregiverID: nil)
            // One caregiver with `deliveries` devices: the cap per caregiver raised so that every one is owed.
            _ = try database.withTransaction { connection in
                try PushOutbox.enqueue(
                    event, source: .slotBulkRecord, environment: .development, deviceCap: deliveries,
                    connection: connection)
            }
            return event.eventKey
        }
        var fanOut: [Double] = []
        var sweep: [Double] = []
        var batches = 0
        var share = CPUShare(childMilliseconds: 0, selfMilliseconds: 0, wallMilliseconds: 0, machineBusy: 0)
        var standIn = 0.0
        for _ in 0..<rounds {
            let key = try owe()
            let start = ContinuousClock.now
            let report = dispatcher.dispatch(
                eventKey: key, database: database, push: push, deadline: dispatcher.sendDeadline(hostDeadline: nil))
            let elapsed = ContinuousClock.now - start
            // A send that failed in transit (the stand-in's connections under 100 streams each) is left for the
            // sweep, as a recording's would be: the fan-out's rate counts what it sent.
            guard report.sent + report.retryScheduled == deliveries, report.sent > 0 else {
                throw BenchmarkError("fan-out sent \(report.sent) of \(deliveries), \(report.retryScheduled) left")
            }
            if report.retryScheduled > 0 {
                print("bench: fan-out to \(deliveries): \(report.retryScheduled) left for the sweep")
            }
            fanOut.append(Double(report.sent) / (milliseconds(elapsed) / 1000))
            try endLeftovers()

            _ = try owe()
            let cpu = CPUShare.Meter()
            let standInStart = emulator.processCPUMilliseconds() ?? 0
            let sweepStart = ContinuousClock.now
            let result = try ChildProcess.run(
                executable: binDirectory.appendingPathComponent("push-sweep"),
                environment: environment(emulator, extra),
                input: Data("{}".utf8))
            let sweepElapsed = result.standardOutputClosedAt - sweepStart
            share = cpu.read(wall: sweepElapsed)
            standIn = (emulator.processCPUMilliseconds() ?? 0) - standInStart
            let summary = try? JSONValue.parse(result.standardOutput)
            guard summary?["sent"]?.integerValue == Int64(deliveries) else {
                throw BenchmarkError(
                    "push-sweep did not send \(deliveries): \(String(decoding: result.standardOutput, as: UTF8.self))")
            }
            batches = Int(summary?["batches"]?.integerValue ?? 0)
            sweep.append(Double(deliveries) / (milliseconds(sweepElapsed) / 1000))
        }
        return SweepResult(
            deliveries: deliveries, fanOutPerSecond: median(fanOut), sweepPerSecond: median(sweep),
            sweepBatches: batches, rounds: rounds, sweepCPU: share, standInMilliseconds: standIn)
    }

    private func milliseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    }
}

/// CPU spent during a measured span: by the child processes waited for in it, by this process, and by the whole
/// machine (the share of all cores busy, from /proc/stat).
struct CPUShare {
    let childMilliseconds: Double
    let selfMilliseconds: Double
    let wallMilliseconds: Double
    /// 0…1: the machine's cores busy (not idle, not waiting for I/O) over the span.
    let machineBusy: Double

    /// CPU milliseconds of the calling thread.
    static func threadMilliseconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
        return Double(now.tv_sec) * 1000 + Double(now.tv_nsec) / 1e6
    }

    struct Meter {
        private let children = Meter.usage(RUSAGE_CHILDREN.rawValue)
        private let own = Meter.usage(RUSAGE_SELF.rawValue)
        private let machine = Meter.machine()

        func read(wall: Duration) -> CPUShare {
            let (busy, total) = Meter.machine()
            let spent = Double(total - machine.total)
            return CPUShare(
                childMilliseconds: Meter.usage(RUSAGE_CHILDREN.rawValue) - children,
                selfMilliseconds: Meter.usage(RUSAGE_SELF.rawValue) - own,
                wallMilliseconds: Double(wall.components.seconds) * 1000 + Double(wall.components.attoseconds) / 1e15,
                machineBusy: spent > 0 ? Double(busy - machine.busy) / spent : 0)
        }

        /// User and system CPU milliseconds of `who`.
        private static func usage(_ who: __rusage_who_t) -> Double {
            var usage = rusage()
            getrusage(who, &usage)
            return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000
                + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1000
        }

        /// The `cpu` line of /proc/stat: busy ticks (all but idle and iowait) and all ticks.
        private static func machine() -> (busy: Int, total: Int) {
            guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
                let line = text.split(separator: "\n").first(where: { $0.hasPrefix("cpu ") })
            else { return (0, 0) }
            let ticks = line.split(separator: " ").dropFirst().compactMap { Int($0) }
            guard ticks.count >= 5 else { return (0, 0) }
            let total = ticks.reduce(0, +)
            return (total - ticks[3] - ticks[4], total)
        }
    }
}

/// Rows the benchmarks create directly.
enum BenchSeed {
    /// The environment a benchmarked function process gets: this process's, plus the database, the HS256 secret,
    /// DEV pushes, quiet logs and, with an emulator, what reaching it takes (its URL, key and CA).
    static func functionEnvironment(
        databaseURL: String, secret: String, emulator: InProcessEmulator?
    ) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["DATABASE_URL"] = databaseURL
        environment["SUPABASE_JWT_SECRET"] = secret
        environment["PUSH_ENVIRONMENT"] = "DEV"
        environment["LOG_LEVEL"] = "warning"
        if let emulator { environment.merge(emulator.environment) { _, new in new } }
        return environment
    }

    /// An API Gateway 2.0 event for a JSON POST to `path` with a bearer token.
    static func post(_ path: String, bearer: String, body: String) throws -> Data {
        try JSONEncoder().encode(
            APIGatewayV2Request(
                routeKey: "POST \(path)", rawPath: path,
                headers: ["authorization": "Bearer \(bearer)", "content-type": "application/json"],
                requestContext: .init(requestId: "bench", http: .init(method: "POST", path: path)), body: body))
    }

    /// A patient with a 08:00 medication and a session, and one linked caregiver with `devices` DEV devices
    /// (written in one statement).
    static func household(devices: Int, connection: PostgresConnection) throws -> (
        patient: UUID, session: String, medication: UUID
    ) {
        let patient = try connection.query("INSERT INTO patients (display_name) VALUES ('ベンチ') RETURNING id")[0]
            .decode(UUID.self, at: 0)
        let medication = try connection.query(
            "INSERT INTO medications (patient_id, name, start_date) VALUES (\(patient), 'bench', '2020-01-01') RETURNING id"
        )[0].decode(UUID.self, at: 0)
        try connection.query("INSERT INTO medication_schedule_times VALUES (\(medication), '08:00')")
        let session = try PatientSessionToken.generate()
        try connection.query(
            """
            INSERT INTO patient_sessions (patient_id, token_hash, expires_at)
            VALUES (\(patient), \(PostgresBytes(session.hash)), now() + interval '1 hour')
            """)
        let caregiver = UUID()
        try connection.query(
            "INSERT INTO caregiver_patient_links (caregiver_id, patient_id) VALUES (\(caregiver), \(patient))")
        try connection.query(
            """
            INSERT INTO push_devices (owner_type, owner_id, token, token_sha256, platform, environment)
            SELECT 'CAREGIVER', \(caregiver), t, sha256(convert_to(t, 'UTF8')), 'ios', 'DEV'
            FROM (SELECT 'bench-' || gen_random_uuid() AS t FROM generate_series(1, \(devices))) s
            """)
        return (patient, session.text, medication)
    }

}

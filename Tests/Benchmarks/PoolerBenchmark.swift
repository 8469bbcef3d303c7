import Codecs
import Libpq
import JOSE
import ProcessSupervision
import CaregiverPush
import Foundation
import TestSupport

/// Transaction pooling: the functions behind PgBouncer in transaction-pooling mode against the database directly, in
/// one run, against one PostgreSQL (whose `max_connections`, 300, is enough for the direct path). `scripts/bench.sh`
/// starts the pooler and passes `BENCH_POOLER_URL` and its `default_pool_size`.
struct PoolerBenchmark {
    let binDirectory: URL
    let databaseURL: String
    let poolerURL: String
    let secret = String(repeating: "p", count: 40)

    struct Cold {
        let directMilliseconds: Double
        let pooledMilliseconds: Double
        let runs: Int
    }

    struct BurstRow {
        let medianMilliseconds: Double
        let p99Milliseconds: Double
        let maximumMilliseconds: Double
        /// Answers other than 200 (none expected on either path).
        let failures: Int
    }

    struct Burst {
        let invocations: Int
        let rounds: Int
        let direct: BurstRow
        let pooled: BurstRow
        /// The most server connections the database served at once during the pooled rounds (pg_stat_activity).
        let peakServerConnectionsPooled: Int
        let peakServerConnectionsDirect: Int
    }

    private func environment(databaseURL: String, emulator: InProcessEmulator?) -> [String: String] {
        BenchSeed.functionEnvironment(databaseURL: databaseURL, secret: secret, emulator: emulator)
    }

    /// Cold `push-register` (a process per request, a new device token each time) to stdout's EOF, `runs` times
    /// per path after one untimed request each, the two paths alternated request by request.
    func coldRegister(runs: Int) throws -> Cold {
        let caregiver = UUID()
        let token = try JWTSigner.sign(
            claims: [
                "sub": .string(caregiver.uuidString.lowercased()), "aud": .string("authenticated"),
                "role": .string("authenticated"), "exp": .number(Date().timeIntervalSince1970 + 3600),
            ],
            using: .hmac(secret: Array(secret.utf8)))
        func event() throws -> Data {
            let body = #"{"token":"bench-pool-\#(UUID().uuidString)","platform":"ios","environment":"DEV"}"#
            return try BenchSeed.post("/api/push/register", bearer: token, body: body)
        }
        let paths = [databaseURL, poolerURL].map { environment(databaseURL: $0, emulator: nil) }
        var samples: [[Double]] = [[], []]
        for round in -1..<runs {
            for (index, environment) in paths.enumerated() {
                let start = ContinuousClock.now
                let result = try ChildProcess.run(
                    executable: binDirectory.appendingPathComponent("push-register"), environment: environment,
                    input: try event())
                let status = (try? JSONValue.parse(result.standardOutput))?["statusCode"]?.integerValue
                guard result.exitStatus == 0, status == 200 else {
                    throw BenchmarkError("push-register answered \(status.map(String.init) ?? "nothing")")
                }
                if round >= 0 { samples[index].append(milliseconds(result.standardOutputClosedAt - start)) }
            }
        }
        return Cold(directMilliseconds: median(samples[0]), pooledMilliseconds: median(samples[1]), runs: runs)
    }

    /// `invocations` cold `dose-record` processes released at once (each a new dose with one device to push to,
    /// the emulator answering after 50 ms), `rounds` times per path, alternated; latency per invocation from the
    /// release to its stdout's EOF, all rounds pooled.
    func burst(invocations: Int, rounds: Int) throws -> Burst {
        let emulator = try InProcessEmulator.start(delayMilliseconds: 50)
        let seed = try PostgresConnection(url: databaseURL)
        defer { seed.close() }
        // One invocation first: the shared FCM token is minted before anything is timed.
        let warm = try BenchSeed.household(devices: 1, connection: seed)
        _ = try ChildProcess.run(
            executable: binDirectory.appendingPathComponent("dose-record"),
            environment: environment(databaseURL: databaseURL, emulator: emulator),
            input: try doseEvent(session: warm.session, medication: warm.medication))
        var latencies: [[Double]] = [[], []]
        var failures = [0, 0]
        var peaks = [0, 0]
        for _ in 0..<rounds {
            for (index, url) in [databaseURL, poolerURL].enumerated() {
                let events = try (0..<invocations).map { _ in
                    let home = try BenchSeed.household(devices: 1, connection: seed)
                    return Array(try doseEvent(session: home.session, medication: home.medication))
                }
                let peak = PeakConnections(url: databaseURL)
                let outcome = ProcessBurst.run(
                    executable: binDirectory.appendingPathComponent("dose-record"),
                    environment: environment(databaseURL: url, emulator: emulator), inputs: events)
                peaks[index] = max(peaks[index], peak.stop())
                latencies[index] += outcome.responseMilliseconds
                failures[index] +=
                    outcome.results.filter {
                        $0.exitStatus != 0
                            || (try? JSONValue.parse($0.standardOutput))?["statusCode"]?.integerValue != 200
                    }.count
            }
        }
        func row(_ index: Int) -> BurstRow {
            BurstRow(
                medianMilliseconds: median(latencies[index]), p99Milliseconds: percentile(latencies[index], 0.99),
                maximumMilliseconds: latencies[index].max() ?? .nan, failures: failures[index])
        }
        return Burst(
            invocations: invocations, rounds: rounds, direct: row(0), pooled: row(1),
            peakServerConnectionsPooled: peaks[1], peakServerConnectionsDirect: peaks[0])
    }

    private func doseEvent(session: String, medication: UUID) throws -> Data {
        let body = #"{"medicationId":"\#(medication.uuidString)","scheduledAt":"2026-01-05T08:00:00+09:00"}"#
        return try BenchSeed.post("/api/dose-records", bearer: session, body: body)
    }

    private func milliseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    }
}

/// Samples how many client backends the server runs, every 5 ms, until stopped.
final class PeakConnections: @unchecked Sendable {
    private let lock = NSLock()
    private var peak = 0
    private var running = true
    private let finished = DispatchSemaphore(value: 0)

    init(url: String) {
        Thread.detachNewThread { [self] in
            defer { finished.signal() }
            guard let connection = try? PostgresConnection(url: url) else { return }
            defer { connection.close() }
            while lock.withLock({ running }) {
                // Client backends other than this sampler.
                if let count = try? connection.query(
                    """
                    SELECT count(*) FROM pg_stat_activity
                    WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
                    """
                ).single?.decode(Int.self, at: 0) {
                    lock.withLock { peak = max(peak, count) }
                }
                Thread.sleep(forTimeInterval: 0.005)
            }
        }
    }

    /// Stops sampling and returns the peak seen.
    func stop() -> Int {
        lock.withLock { running = false }
        finished.wait()
        return lock.withLock { peak }
    }
}

/// The `fraction` quantile (nearest rank).
func percentile(_ values: [Double], _ fraction: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    let rank = Int((fraction * Double(sorted.count)).rounded(.up))
    return sorted[min(max(rank, 1), sorted.count) - 1]
}

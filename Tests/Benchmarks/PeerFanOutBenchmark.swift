import Codecs
import ProcessSupervision
import TestSupport
import CaregiverPush
import FCMEmulator
import Foundation
import Synchronization

/// Google's own Python Admin SDK (`firebase-admin`) doing the fan-out of ``FanOutBenchmark``: the same emulator,
/// the same device tokens, the same message, in the same run. A peer measured beside ours says whether our figures
/// are good or merely ours: the official SDK is what a team would otherwise use.
///
/// The SDK runs as a child process (Tests/Benchmarks/peer/firebase_admin_fanout.py) from the virtual environment
/// that scripts/bench.sh makes; it times its own rounds, so process start and imports are not counted.
struct FirebaseAdminPeer {
    /// What the peer reported for one device count.
    struct Result {
        let version: String
        let python: String
        let api: String
        let medianMilliseconds: Double
        let samples: [Double]
        /// The SDK's connection pool for FCM (requests' `pool_maxsize`), which the script applies to the emulator.
        let poolSize: Int
        /// The untimed first round: token mint, connections.
        let warmUpMilliseconds: Double
        /// Access tokens the emulator minted for this run of the script (one process, one credential).
        let mints: Int
    }

    /// Whether the peer can run, and if not, why: the report says so rather than leaving the column out silently.
    enum Availability {
        case available(FirebaseAdminPeer)
        case unavailable(reason: String)

        /// From `BENCH_PEER_PYTHON` (the venv's interpreter) or `BENCH_PEER_UNAVAILABLE` (why bench.sh could not
        /// make it), both set by scripts/bench.sh.
        static func fromEnvironment(_ environment: [String: String], repetitions: Int) -> Availability {
            if let reason = environment["BENCH_PEER_UNAVAILABLE"], !reason.isEmpty {
                return .unavailable(reason: reason)
            }
            guard let python = environment["BENCH_PEER_PYTHON"], !python.isEmpty else {
                return .unavailable(reason: "BENCH_PEER_PYTHON is not set (run the bench through `make bench`)")
            }
            guard FileManager.default.isExecutableFile(atPath: python) else {
                return .unavailable(reason: "BENCH_PEER_PYTHON=\(python) is not an executable")
            }
            let script = URL(fileURLWithPath: "Tests/Benchmarks/peer/firebase_admin_fanout.py")
            guard FileManager.default.fileExists(atPath: script.path) else {
                return .unavailable(reason: "\(script.path) is missing (the bench runs from the package root)")
            }
            return .available(
                FirebaseAdminPeer(python: URL(fileURLWithPath: python), script: script, repetitions: repetitions))
        }
    }

    let python: URL
    let script: URL
    let repetitions: Int

    /// Runs the SDK's fan-out to `tokens` with `api` (`send_each` or `send_each_async`).
    /// - Parameter message: our `{"message": {...}}` for one device, which the script rebuilds with the SDK's classes.
    /// - Throws: unless the script exits 0 with every message of every round a success, and the emulator delivered
    ///   exactly that many messages (warm-up included): a peer that failed quietly would look fast.
    func run(emulator: any FCMStandIn, tokens: [String], message: [UInt8], api: String) throws -> Result {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bench-peer-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyFile = directory.appendingPathComponent("service-account.json")
        let tokenFile = directory.appendingPathComponent("tokens.txt")
        let messageFile = directory.appendingPathComponent("message.json")
        try Data(emulator.serviceAccountJSON.utf8).write(to: keyFile)
        try Data(tokens.joined(separator: "\n").utf8).write(to: tokenFile)
        try Data(message).write(to: messageFile)

        let (deliveredBefore, mintsBefore) = emulator.counts()
        let result = try ChildProcess.run(
            executable: python,
            arguments: [
                script.path, "--base-url", emulator.baseURL, "--key-file", keyFile.path, "--tokens", tokenFile.path,
                "--message", messageFile.path, "--repetitions", String(repetitions), "--api", api,
            ],
            // Both of the SDK's HTTP stacks trust the emulator's CA the way they trust any: requests (send_each and
            // google-auth's token refresh) through REQUESTS_CA_BUNDLE, httpx (send_each_async) through SSL_CERT_FILE.
            environment: ProcessInfo.processInfo.environment.merging(
                emulator.caFile.map { ["SSL_CERT_FILE": $0, "REQUESTS_CA_BUNDLE": $0] } ?? [:]
            ) { _, new in new },
            input: Data())
        let (deliveredAfter, mintsAfter) = emulator.counts()
        let delivered = deliveredAfter - deliveredBefore
        let errorText = String(decoding: result.standardError, as: UTF8.self)
        guard result.exitStatus == 0 else {
            throw BenchmarkError(
                "the firebase-admin peer (\(api), \(tokens.count) devices) exited \(result.exitStatus): \(errorText)")
        }
        guard let report = try? JSONValue.parse(Array(result.standardOutput)),
            let median = report["median_ms"]?.numberValue,
            let samples = report["samples_ms"]?.arrayValue?.compactMap(\.numberValue),
            let successes = report["success_count"]?.integerValue.map({ Int($0) })
        else {
            throw BenchmarkError(
                "the firebase-admin peer printed no report: \(String(decoding: result.standardOutput, as: UTF8.self))")
        }
        guard successes == tokens.count * repetitions, delivered == tokens.count * (repetitions + 1) else {
            throw BenchmarkError(
                "the firebase-admin peer (\(api)) reported \(successes) successes and the emulator delivered \(delivered); "
                    + "expected \(tokens.count * repetitions) and \(tokens.count * (repetitions + 1))")
        }
        return Result(
            version: report["version"]?.stringValue ?? "?", python: report["python"]?.stringValue ?? "?", api: api,
            medianMilliseconds: median, samples: samples,
            poolSize: report["fcm_pool_maxsize"]?.integerValue.map { Int($0) } ?? 0,
            warmUpMilliseconds: report["warm_up_ms"]?.numberValue ?? .nan, mints: mintsAfter - mintsBefore)
    }
}

extension InProcessEmulator {
    /// How many `messages:send` requests the emulator has received so far.
    func requestCount() -> Int {
        read { await $0.received.count }
    }

    /// Connections that carried the requests received since `index`, the most streams in flight on one connection
    /// since the last reset, and whether every one of those requests was an HTTP/2 stream.
    func connectionUsage(since index: Int) -> (connections: Int, maxConcurrentStreams: Int, allHTTP2: Bool) {
        read { state in
            let requests = await state.received.dropFirst(index)
            let connections = Set(requests.compactMap { $0.connection?.number })
            return (
                connections.count, await state.connectionUsage.maxConcurrentStreams,
                requests.allSatisfy { $0.connection?.http2 == true }
            )
        }
    }

    /// Starts counting concurrent streams afresh (the previous device count's peak would otherwise stay).
    func resetStreamCount() {
        read { await $0.resetStreamCount() }
    }

    /// Runs `body` against the emulator's actor and waits for it, for synchronous callers.
    func read<T: Sendable>(_ body: @escaping @Sendable (FCMEmulatorState) async -> T) -> T {
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        let state = self.state
        Task {
            let value = await body(state)
            result.withLock { $0 = value }
            done.signal()
        }
        done.wait()
        return result.withLock { $0! }
    }

    /// How many `messages:send` the emulator has answered 200, and how many access tokens it has minted, so far:
    /// read from its actor for synchronous callers.
    func counts() -> (delivered: Int, mints: Int) {
        let counts = Mutex((0, 0))
        let done = DispatchSemaphore(value: 0)
        let state = self.state
        Task {
            let delivered = await state.received.filter { $0.status == 200 }.count
            let mints = await state.mints
            counts.withLock { $0 = (delivered, mints) }
            done.signal()
        }
        done.wait()
        return counts.withLock { $0 }
    }
}

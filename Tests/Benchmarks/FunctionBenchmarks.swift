import Libpq
import ProcessSupervision
import TestSupport
import CaregiverPush
import Foundation
import Logging
import Synchronization

/// Benchmarks of the built functions through their stdin/stdout contract, against the database and the in-process
/// FCM emulator: the response must not wait for the push, cold starts must share one OAuth token, and the device
/// queries must not slow down as `push_devices` grows.
struct FunctionBenchmarks {
    let binDirectory: URL
    let databaseURL: String
    let secret = String(repeating: "s", count: 40)

    private func environment(_ emulator: InProcessEmulator?) -> [String: String] {
        BenchSeed.functionEnvironment(databaseURL: databaseURL, secret: secret, emulator: emulator)
    }

    /// A patient with one morning medication and a session; with a linked caregiver's device when `withDevice`.
    private func patient(withDevice: Bool, connection: PostgresConnection) throws -> (token: String, medication: UUID) {
        let home = try BenchSeed.household(devices: withDevice ? 1 : 0, connection: connection)
        return (home.session, home.medication)
    }

    private func doseEvent(token: String, medication: UUID) throws -> Data {
        let body = #"{"medicationId":"\#(medication.uuidString)","scheduledAt":"2026-01-05T08:00:00+09:00"}"#
        return try BenchSeed.post("/api/dose-records", bearer: token, body: body)
    }

    /// Milliseconds from start to stdout's EOF (what a host waits for), and to exit.
    private func runDose(_ event: Data, environment: [String: String]) throws -> (response: Double, exit: Double) {
        let start = ContinuousClock.now
        let result = try ChildProcess.run(
            executable: binDirectory.appendingPathComponent("dose-record"), environment: environment, input: event)
        guard result.exitStatus == 0 else { throw BenchmarkError("dose-record exited \(result.exitStatus)") }
        return (milliseconds(result.standardOutputClosedAt - start), milliseconds(result.exitedAt - start))
    }

    /// dose-record's response latency with a device and an FCM answering after 2 s, against a patient with no
    /// device: the push must not show in the response time.
    func responseVersusPush(runs: Int) throws -> (withPush: Double, withoutPush: Double, exitWithPush: Double) {
        let emulator = try InProcessEmulator.start(delayMilliseconds: 2000)
        let connection = try PostgresConnection(url: databaseURL)
        defer { connection.close() }
        var withPush: [Double] = []
        var exits: [Double] = []
        var withoutPush: [Double] = []
        for _ in 0..<runs {
            let pushed = try patient(withDevice: true, connection: connection)
            let timing = try runDose(
                try doseEvent(token: pushed.token, medication: pushed.medication), environment: environment(emulator))
            withPush.append(timing.response)
            exits.append(timing.exit)
            let quiet = try patient(withDevice: false, connection: connection)
            withoutPush.append(
                try runDose(
                    try doseEvent(token: quiet.token, medication: quiet.medication), environment: environment(emulator)
                ).response)
        }
        return (median(withPush), median(withoutPush), median(exits))
    }

    /// Concurrent cold dose-record invocations against an empty token cache: how many OAuth mints.
    func concurrentColdMints(invocations: Int) throws -> Int {
        let emulator = try InProcessEmulator.start(delayMilliseconds: 50)
        let connection = try PostgresConnection(url: databaseURL)
        let events = try (0..<invocations).map { _ in
            let pushed = try patient(withDevice: true, connection: connection)
            return try doseEvent(token: pushed.token, medication: pushed.medication)
        }
        connection.close()
        let environment = environment(emulator)
        let failures = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: invocations) { index in
            if (try? runDose(events[index], environment: environment)) == nil { failures.withLock { $0 += 1 } }
        }
        guard failures.withLock({ $0 }) == 0 else { throw BenchmarkError("a cold invocation failed") }
        let semaphore = DispatchSemaphore(value: 0)
        let mints = Mutex(0)
        Task {
            let count = await emulator.state.mints
            mints.withLock { $0 = count }
            semaphore.signal()
        }
        semaphore.wait()
        return mints.withLock { $0 }
    }

    private func milliseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    }
}

import Libpq
import FunctionRuntime
import CaregiverPush
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A built function started with its event on stdin and left running, so that a test can SIGKILL it at a chosen
/// moment — the way a host dies under it (a timeout, OOM, a deploy).
package final class KillableRun {
    package let process: Process
    private let stdout = LockedData()
    private let stderr = LockedData()
    private let readers = DispatchGroup()

    /// - Parameter stalledStdout: the stdout pipe's buffer is filled before the start and never read while the
    ///   process runs, so the function blocks writing its response: a kill then lands after anything it committed
    ///   and before its caller could have had an answer.
    package init(_ function: String, event: Data, environment: [String: String], stalledStdout: Bool = false) throws {
        _ = TestDatabase.migrated
        let process = Process()
        process.executableURL = Executables.binDirectory.appendingPathComponent(function)
        process.environment = environment
        let input = Pipe()
        let output = Pipe()
        let errors = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        if stalledStdout { Self.fill(output.fileHandleForWriting.fileDescriptor) }
        try process.run()
        self.process = process
        try input.fileHandleForWriting.write(contentsOf: event)
        try input.fileHandleForWriting.close()
        stderr.drain(errors.fileHandleForReading, group: readers)
        if !stalledStdout { stdout.drain(output.fileHandleForReading, group: readers) }
    }

    package var pid: Int32 { process.processIdentifier }

    /// SIGKILL; returns whether the process was still running (so the kill is what ended it).
    @discardableResult
    package func kill() -> Bool {
        let wasRunning = process.isRunning
        if wasRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        finish()
        return wasRunning && process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL
    }

    /// Waits for the process to end by itself (a test's bound, not a performance claim).
    package func wait(seconds: Double = 60) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < end { Thread.sleep(forTimeInterval: 0.02) }
        guard !process.isRunning else { return false }
        finish()
        return true
    }

    private func finish() {
        _ = readers.wait(timeout: .now() + 5)
        LeakCapture.record(stdout.value, source: "killable \(process.executableURL?.lastPathComponent ?? "") stdout")
        LeakCapture.record(stderr.value, source: "killable \(process.executableURL?.lastPathComponent ?? "") stderr")
    }

    /// Whatever reached stdout (empty when stdout was stalled).
    package var standardOutput: String { String(decoding: stdout.value, as: UTF8.self) }
    package var standardError: String { String(decoding: stderr.value, as: UTF8.self) }

    /// The response document, once stdout was read to EOF (the function closes it before its push).
    package var response: APIGatewayV2Response? {
        try? JSONDecoder().decode(APIGatewayV2Response.self, from: stdout.value)
    }

    /// Waits until the function has closed its stdout (its response is complete) while it goes on running.
    package func waitForResponse(seconds: Double = 30) -> APIGatewayV2Response? {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if let response { return response }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return nil
    }

    /// Fills a pipe's buffer through its write end without blocking.
    private static func fill(_ descriptor: Int32) {
        let flags = fcntl(descriptor, F_GETFL)
        _ = fcntl(descriptor, F_SETFL, flags | O_NONBLOCK)
        let chunk = [UInt8](repeating: UInt8(ascii: " "), count: 4096)
        while chunk.withUnsafeBytes({ write(descriptor, $0.baseAddress, $0.count) }) > 0 {}
        _ = fcntl(descriptor, F_SETFL, flags)
    }
}

/// Polls `condition` until it holds or `seconds` pass; returns whether it held. Waits for state another process
/// reaches; never a performance assertion.
package func eventually(seconds: Double = 30, _ condition: () throws -> Bool) rethrows -> Bool {
    let end = Date().addingTimeInterval(seconds)
    repeat {
        if try condition() { return true }
        Thread.sleep(forTimeInterval: 0.02)
    } while Date() < end
    return try condition()
}

/// A database session a test holds open to keep a lock, with the server pid other sessions wait behind.
package final class LockHolder {
    package let connection: PostgresConnection
    package let backendPID: Int
    private let url: String

    package init(url: String = TestDatabase.url) throws {
        self.url = url
        connection = try PostgresConnection(url: url, applicationName: "caregiver-push-tests")
        // The pid inside the transaction: behind a transaction-pooling proxy (the pooled test pass) a statement
        // before BEGIN may run on another server session than the transaction that holds the locks.
        try connection.query("BEGIN")
        backendPID = try connection.query("SELECT pg_backend_pid()").single?.decode(Int.self, at: 0) ?? -1
    }

    /// Whether some session is waiting for a lock this holder has.
    package var isBlockingSomeone: Bool {
        get throws {
            let probe = try PostgresConnection(url: url, applicationName: "caregiver-push-tests")
            defer { probe.close() }
            return try probe.query(
                "SELECT count(*) FROM pg_stat_activity WHERE \(backendPID) = ANY(pg_blocking_pids(pid))"
            ).single?.decode(Int.self, at: 0) ?? 0 > 0
        }
    }

    package func release() {
        _ = try? connection.query("ROLLBACK")
        connection.close()
    }
}

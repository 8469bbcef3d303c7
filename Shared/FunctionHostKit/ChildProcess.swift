import Dispatch
import Foundation
import Synchronization

/// Runs an executable with bytes on its stdin and collects its stdout and stderr.
///
/// Both pipes are drained on their own threads while the child runs — reading after exit deadlocks once the child
/// has written more than a pipe holds (~64 KiB). Used by `runner invoke` and by the tests that drive the built
/// functions through their real stdin/stdout contract.
///
/// Foundation's `Process` learns of the exit when a socket that every descendant inherits closes, so `run` returns
/// only once any daemon the child left behind has let go of it (`scripts/pg.sh` starts PostgreSQL without it).
public enum ChildProcess {
    public struct Result: Sendable {
        public let exitStatus: Int32
        public let standardOutput: Data
        public let standardError: Data
        /// When stdout reached EOF, and when the process had exited, on one clock: a function that closes stdout
        /// before its post-response work shows `standardOutputClosedAt` well before `exitedAt`.
        public let standardOutputClosedAt: ContinuousClock.Instant
        public let exitedAt: ContinuousClock.Instant
        /// The same two moments on the wall clock, to compare with another process's timestamps.
        public let standardOutputClosedAtDate: Date
        public let exitedAtDate: Date
    }

    /// - Parameters:
    ///   - executable: the program.
    ///   - arguments: its arguments (no shell is involved).
    ///   - environment: its whole environment; the runner's own when `nil`.
    ///   - input: written to its stdin, which is then closed.
    ///   - forwardStandardError: also copy the child's stderr to ours as it arrives.
    /// - Throws: when the process cannot be started.
    public static func run(
        executable: URL, arguments: [String] = [], environment: [String: String]? = nil, input: Data,
        forwardStandardError: Bool = false
    ) throws -> Result {
        // A child that exits before reading all its input would otherwise kill us with SIGPIPE on the write.
        signal(SIGPIPE, SIG_IGN)
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        if let environment { process.environment = environment }
        let stdinPipe = Pipe()
        let stdoutPipe = Pipe()
        let stderrPipe = Pipe()
        process.standardInput = stdinPipe
        process.standardOutput = stdoutPipe
        process.standardError = stderrPipe
        try process.run()

        let collected = Collected()
        let group = DispatchGroup()
        let stdoutReader = stdoutPipe.fileHandleForReading
        let stderrReader = stderrPipe.fileHandleForReading
        let stdinWriter = stdinPipe.fileHandleForWriting
        blockingThread(group: group) {
            let data = stdoutReader.readDataToEndOfFile()
            collected.finishStandardOutput(data)
        }
        blockingThread(group: group) {
            while true {
                let chunk = stderrReader.availableData
                if chunk.isEmpty { break }
                collected.appendStandardError(chunk)
                if forwardStandardError { FileHandle.standardError.write(chunk) }
            }
        }
        blockingThread(group: group) {
            // A child that exits without reading its input makes this write fail (EPIPE); that is its business.
            try? stdinWriter.write(contentsOf: input)
            try? stdinWriter.close()
        }
        process.waitUntilExit()
        let exitedAt = ContinuousClock.now
        let exitedAtDate = Date()
        group.wait()
        return collected.result(exitStatus: process.terminationStatus, exitedAt: exitedAt, exitedAtDate: exitedAtDate)
    }

    /// What the reader threads gather, behind a lock.
    private final class Collected: Sendable {
        private struct State {
            var standardOutput = Data()
            var standardError = Data()
            var standardOutputClosedAt: ContinuousClock.Instant?
            var standardOutputClosedAtDate: Date?
        }
        private let state = Mutex(State())

        func finishStandardOutput(_ data: Data) {
            let now = ContinuousClock.now
            let date = Date()
            state.withLock {
                $0.standardOutput = data
                $0.standardOutputClosedAt = now
                $0.standardOutputClosedAtDate = date
            }
        }

        func appendStandardError(_ data: Data) {
            state.withLock { $0.standardError.append(data) }
        }

        func result(exitStatus: Int32, exitedAt: ContinuousClock.Instant, exitedAtDate: Date) -> Result {
            state.withLock {
                Result(
                    exitStatus: exitStatus, standardOutput: $0.standardOutput, standardError: $0.standardError,
                    standardOutputClosedAt: $0.standardOutputClosedAt ?? exitedAt, exitedAt: exitedAt,
                    standardOutputClosedAtDate: $0.standardOutputClosedAtDate ?? exitedAtDate, exitedAtDate: exitedAtDate)
            }
        }
    }
}

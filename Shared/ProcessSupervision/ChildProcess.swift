import Foundation
import Subprocess
import Synchronization

/// Runs an executable with bytes on its stdin and collects its stdout and stderr.
///
/// `try await run(…)`, what the runner uses (`runner invoke`, `runner dev`'s scripts and rebuilds), is
/// swift-subprocess: no thread of its own, the pipes read through the package's one epoll thread and the exit seen on
/// a pidfd. It reads until the child has exited and its pipes are empty, even if a descendant still holds them. (The
/// tests and benchmarks, which drive the built functions from plain threads, have a synchronous form of their own on
/// Foundation's `Process`, in TestSupport.)
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

        /// The package's own spawners build results too (TestSupport's synchronous `run` and its burst of children).
        package init(
            exitStatus: Int32, standardOutput: Data, standardError: Data,
            standardOutputClosedAt: ContinuousClock.Instant, exitedAt: ContinuousClock.Instant,
            standardOutputClosedAtDate: Date, exitedAtDate: Date
        ) {
            self.exitStatus = exitStatus
            self.standardOutput = standardOutput
            self.standardError = standardError
            self.standardOutputClosedAt = standardOutputClosedAt
            self.exitedAt = exitedAt
            self.standardOutputClosedAtDate = standardOutputClosedAtDate
            self.exitedAtDate = exitedAtDate
        }
    }

    /// What the readers gather, behind a lock (the async run here, and the tests' synchronous one).
    package final class Collected: Sendable {
        private struct State {
            var standardOutput = Data()
            var standardError = Data()
            var standardOutputClosedAt: ContinuousClock.Instant?
            var standardOutputClosedAtDate: Date?
        }
        private let state = Mutex(State())

        package init() {}

        package func finishStandardOutput(_ data: Data) {
            let now = ContinuousClock.now
            let date = Date()
            state.withLock {
                $0.standardOutput = data
                $0.standardOutputClosedAt = now
                $0.standardOutputClosedAtDate = date
            }
        }

        package func appendStandardError(_ data: Data) {
            state.withLock { $0.standardError.append(data) }
        }

        package func result(exitStatus: Int32, exitedAt: ContinuousClock.Instant, exitedAtDate: Date) -> Result {
            state.withLock {
                Result(
                    exitStatus: exitStatus, standardOutput: $0.standardOutput, standardError: $0.standardError,
                    standardOutputClosedAt: $0.standardOutputClosedAt ?? exitedAt, exitedAt: exitedAt,
                    standardOutputClosedAtDate: $0.standardOutputClosedAtDate ?? exitedAtDate,
                    exitedAtDate: exitedAtDate)
            }
        }
    }
}

extension ChildProcess {
    /// Runs `executable` on swift-subprocess: the caller's task waits, no thread blocks. The child leads a process
    /// group of its own, as with Foundation's `Process`.
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
    ) async throws -> Result {
        // A child that exits before reading all its input would otherwise kill us with SIGPIPE on the write.
        signal(SIGPIPE, SIG_IGN)
        let collected = Collected()
        let outcome = try await Subprocess.run(
            configuration(executable: executable, arguments: arguments, environment: environment),
            input: .inputWriter, output: .sequence, error: .sequence
        ) { execution in
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    collected.finishStandardOutput(await readToEnd(execution.standardOutput))
                }
                group.addTask {
                    await forEachChunk(of: execution.standardError) { chunk in
                        collected.appendStandardError(chunk)
                        if forwardStandardError { FileHandle.standardError.write(chunk) }
                    }
                }
                group.addTask {
                    // A child that exits without reading its input makes this write fail (EPIPE); that is its business.
                    let writer = execution.standardInputWriter
                    _ = try? await writer.write(Array(input))
                    try? await writer.finish()
                }
            }
        }
        // `run` returns once the body is done (stdout at EOF) and the child has been reaped.
        let exitedAt = ContinuousClock.now
        let exitedAtDate = Date()
        return collected.result(
            exitStatus: exitStatus(outcome.terminationStatus), exitedAt: exitedAt, exitedAtDate: exitedAtDate)
    }

    /// How the host starts a child: `executable` itself (no `PATH` search, no shell), `environment` as its whole
    /// environment (ours when `nil`), as the leader of a new process group (so that a kill reaches what it starts).
    /// swift-subprocess spawns with `posix_spawn`: pipes opened close-on-exec, every other descriptor closed in the
    /// child (`closefrom(3)`), its signal mask emptied and every disposition reset to the default (`SIGPIPE` too,
    /// which we ignore).
    static func configuration(
        executable: URL, arguments: [String], environment: [String: String]?
    ) -> Subprocess.Configuration {
        var options = PlatformOptions()
        options.processGroupID = 0
        let childEnvironment: Subprocess.Environment =
            environment.map { environment in
                .custom(
                    Dictionary(
                        environment.compactMap { name, value in
                            Subprocess.Environment.Key(rawValue: name).map { ($0, value) }
                        },
                        uniquingKeysWith: { _, last in last }))
            } ?? .inherit
        return Subprocess.Configuration(
            executable: .path(.init(executable.path)), arguments: Arguments(arguments), environment: childEnvironment,
            platformOptions: options)
    }

    /// As Foundation's `terminationStatus` gives it: the exit code, or the number of the signal that ended it.
    static func exitStatus(_ status: TerminationStatus) -> Int32 {
        switch status {
        case .exited(let code): code
        case .signaled(let signal): signal
        }
    }

    /// Everything read from `stream` until EOF (or until the child has exited and the pipe is empty).
    static func readToEnd(_ stream: SubprocessOutputSequence) async -> Data {
        var data = Data()
        await forEachChunk(of: stream) { data.append($0) }
        return data
    }

    /// Calls `body` with each chunk read from `stream` as it arrives; a read error ends the stream like EOF.
    static func forEachChunk(of stream: SubprocessOutputSequence, _ body: (Data) -> Void) async {
        do {
            for try await buffer in stream {
                body(buffer.withUnsafeBytes { Data($0) })
            }
        } catch {}
    }
}

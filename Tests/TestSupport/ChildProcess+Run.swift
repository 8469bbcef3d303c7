import Dispatch
import Foundation
import ProcessSupervision
import Synchronization

extension ChildProcess {
    /// The same contract as the runner's `try await run(…)`, for the tests and benchmarks that drive the built
    /// functions through their real stdin/stdout from plain threads: Foundation's `Process`, waited for
    /// synchronously. A synchronous wait on swift-subprocess would block a thread of the 2-core cooperative pool
    /// while the package still needs a free one to finish (it awaits an unstructured task on the global executor),
    /// and two such waits at once never return.
    ///
    /// Both pipes are drained on threads of their own while the child runs — reading after exit deadlocks once the
    /// child has written more than a pipe holds (~64 KiB). Foundation's `Process` learns of the exit when a socket
    /// that every descendant inherits closes, so this returns only once any daemon the child left behind has let go
    /// of it (`scripts/pg.sh` starts PostgreSQL without it).
    /// - Parameters:
    ///   - executable: the program.
    ///   - arguments: its arguments (no shell is involved).
    ///   - environment: its whole environment; ours when `nil`.
    ///   - input: written to its stdin, which is then closed.
    ///   - forwardStandardError: also copy the child's stderr to ours as it arrives.
    /// - Throws: when the process cannot be started.
    package static func run(
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

    /// Runs `body`, which blocks (a pipe read to EOF, a write to a child's stdin), on a thread of its own.
    ///
    /// Not on `DispatchQueue.global()`: libdispatch sizes that pool to the cores and adds a thread only about once a
    /// second while all of them are blocked, so on two cores a test's reads could wait seconds for the pool to grow.
    private static func blockingThread(group: DispatchGroup, _ body: @escaping @Sendable () -> Void) {
        group.enter()
        let thread = Thread {
            body()
            group.leave()
        }
        thread.stackSize = 256 * 1024
        thread.start()
    }
}

import CProcessLimits
import Foundation
import Subprocess
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A running function process, as the runner sees it: its stdout (complete at EOF, which may come well before the
/// process ends), its exit, its stderr line by line, and a way to kill it. No shell is involved.
///
/// Supervised by swift-subprocess: the pipes are read through the package's one epoll thread and the exit is seen on
/// a pidfd, so a process costs no thread of its own however long it lives (a warm worker holds its stdout and stderr
/// for its whole life; with Foundation's `Process` each pipe needed a blocked thread).
public final class FunctionProcess: Sendable {
    private struct State {
        var standardOutput: Data?
        var exitStatus: Int32?
        var outputWaiters: [CheckedContinuation<Data, Never>] = []
        var exitWaiters: [CheckedContinuation<Int32, Never>] = []
    }

    public let pid: Int32
    private let state: Mutex<State>

    private init(pid: Int32) {
        self.pid = pid
        self.state = Mutex(State())
    }

    /// Starts `executable`, and returns once it runs (under its memory limit).
    /// - Parameters:
    ///   - environment: its whole environment.
    ///   - input: written to stdin, which is then closed; `nil` gives it an empty stdin (a Runtime-API worker).
    ///   - memoryLimitBytes: the function's memory size, enforced as its data limit (`RLIMIT_DATA`: heap and private
    ///     writable mappings). It is set right after the spawn, before any input is written; a function that needs
    ///     more fails to allocate and dies, as a Lambda function past its memory does.
    ///   - standardErrorLine: receives each stderr line as it is written (without its newline).
    /// - Throws: when the executable cannot be started, or its limit cannot be set (it is then killed).
    public static func launch(
        executable: URL, arguments: [String] = [], environment: [String: String], input: Data?,
        memoryLimitBytes: Int? = nil, standardErrorLine: @escaping @Sendable (String) -> Void
    ) async throws -> FunctionProcess {
        signal(SIGPIPE, SIG_IGN)
        let configuration = ChildProcess.configuration(
            executable: executable, arguments: arguments, environment: environment)
        return try await withCheckedThrowingContinuation { continuation in
            let launch = Launch(continuation)
            // The process outlives this call: it is supervised by a task of its own until it has been reaped.
            Task {
                do {
                    let status: Int32
                    if let input {
                        status = ChildProcess.exitStatus(
                            try await Subprocess.run(
                                configuration, input: .inputWriter, output: .sequence, error: .sequence
                            ) { execution in
                                await supervise(
                                    execution, launch: launch, memoryLimitBytes: memoryLimitBytes,
                                    standardErrorLine: standardErrorLine
                                ) {
                                    // A function that exits without reading its input makes this fail (EPIPE).
                                    let writer = execution.standardInputWriter
                                    _ = try? await writer.write(Array(input))
                                    try? await writer.finish()
                                }
                            }.terminationStatus)
                    } else {
                        status = ChildProcess.exitStatus(
                            try await Subprocess.run(
                                configuration, input: .none, output: .sequence, error: .sequence
                            ) { execution in
                                await supervise(
                                    execution, launch: launch, memoryLimitBytes: memoryLimitBytes,
                                    standardErrorLine: standardErrorLine, writeInput: nil)
                            }.terminationStatus)
                    }
                    launch.handle?.finish(exitStatus: status)
                } catch {
                    // Not started (the caller gets the error), or no longer watchable: waiters are not left hanging.
                    if let handle = launch.fail(error) {
                        handle.finish(standardOutput: Data())
                        handle.finish(exitStatus: -1)
                    }
                }
            }
        }
    }

    /// The body of a function's run: the memory limit, then the caller has its handle, then stdin is written while
    /// stdout and stderr are read; it returns once all three are done (the exit is awaited by swift-subprocess).
    private static func supervise<Input: InputProtocol>(
        _ execution: Execution<Input, SequenceOutput, SequenceOutput>, launch: Launch, memoryLimitBytes: Int?,
        standardErrorLine: @escaping @Sendable (String) -> Void, writeInput: (@Sendable () async -> Void)?
    ) async {
        let pid = execution.processIdentifier.value
        if let memoryLimitBytes, caregiver_push_limit_data(pid, UInt64(memoryLimitBytes)) != 0 {
            let error = errno
            _ = Glibc.kill(pid, SIGKILL)
            _ = launch.fail(FunctionProcessError.limitNotSet(errno: error))
            return
        }
        let handle = FunctionProcess(pid: pid)
        launch.started(handle)
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                handle.finish(standardOutput: await ChildProcess.readToEnd(execution.standardOutput))
            }
            group.addTask {
                var buffer = Data()
                await ChildProcess.forEachChunk(of: execution.standardError) { chunk in
                    buffer.append(chunk)
                    while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                        standardErrorLine(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                        buffer.removeSubrange(buffer.startIndex...newline)
                    }
                }
                if !buffer.isEmpty { standardErrorLine(String(decoding: buffer, as: UTF8.self)) }
            }
            if let writeInput { group.addTask { await writeInput() } }
        }
    }

    /// `launch`'s continuation, resumed once (with the handle, or with why there is none), and the handle for the
    /// supervising task.
    private final class Launch: Sendable {
        private let state:
            Mutex<(continuation: CheckedContinuation<FunctionProcess, any Error>?, handle: FunctionProcess?)>

        init(_ continuation: CheckedContinuation<FunctionProcess, any Error>) { state = Mutex((continuation, nil)) }

        var handle: FunctionProcess? { state.withLock { $0.handle } }

        func started(_ handle: FunctionProcess) {
            let continuation = state.withLock { state in
                state.handle = handle
                defer { state.continuation = nil }
                return state.continuation
            }
            continuation?.resume(returning: handle)
        }

        /// Throws `error` to the caller if it is still waiting; else returns the handle it already has.
        func fail(_ error: any Error) -> FunctionProcess? {
            let (continuation, handle) = state.withLock { state in
                defer { state.continuation = nil }
                return (state.continuation, state.handle)
            }
            continuation?.resume(throwing: error)
            return handle
        }
    }

    private func finish(standardOutput data: Data) {
        let waiters = state.withLock { state -> [CheckedContinuation<Data, Never>] in
            guard state.standardOutput == nil else { return [] }
            state.standardOutput = data
            defer { state.outputWaiters = [] }
            return state.outputWaiters
        }
        for waiter in waiters { waiter.resume(returning: data) }
    }

    private func finish(exitStatus: Int32) {
        let waiters = state.withLock { state -> [CheckedContinuation<Int32, Never>] in
            guard state.exitStatus == nil else { return [] }
            state.exitStatus = exitStatus
            defer { state.exitWaiters = [] }
            return state.exitWaiters
        }
        for waiter in waiters { waiter.resume(returning: exitStatus) }
    }

    /// Everything the process wrote to stdout, once it closed it.
    public func standardOutput() async -> Data {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Data? in
                if let data = state.standardOutput { return data }
                state.outputWaiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// The exit status, once the process has ended.
    public func exitStatus() async -> Int32 {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Int32? in
                if let status = state.exitStatus { return status }
                state.exitWaiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Whether the process has ended.
    public var hasExited: Bool { state.withLock { $0.exitStatus != nil } }

    /// Sends `signal` (SIGKILL by default) to the process and everything it started, unless it has already ended.
    ///
    /// The child starts as the leader of a process group of its own, so the group is signalled: a function
    /// killed at its timeout must not leave a child behind that goes on working (or holding the descriptors by which
    /// its exit is noticed).
    public func kill(_ signal: Int32 = SIGKILL) {
        guard !hasExited else { return }
        if Glibc.kill(-pid, signal) != 0 { _ = Glibc.kill(pid, signal) }
    }
}

public enum FunctionProcessError: Error, CustomStringConvertible {
    /// prlimit(2) failed on the new process.
    case limitNotSet(errno: Int32)

    public var description: String {
        switch self {
        case .limitNotSet(let number): "the memory limit could not be set (errno \(number))"
        }
    }
}

/// Local TCP ports, for `runner dev`'s check before it starts anything.
public enum LoopbackPort {
    /// Whether 127.0.0.1:`port` is taken by a listener (`nil` when that cannot be told).
    public static func isInUse(_ port: Int) -> Bool? {
        switch caregiver_push_loopback_port_in_use(Int32(port)) {
        case 0: false
        case 1: true
        default: nil
        }
    }
}

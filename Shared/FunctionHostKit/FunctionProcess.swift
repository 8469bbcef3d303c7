import CProcessLimits
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A running function process, as the runner sees it: its stdout (complete at EOF, which may come well before the
/// process ends), its exit, its stderr line by line, and a way to kill it. No shell is involved.
public final class FunctionProcess: Sendable {
    /// Holds the `Process` until it has exited. `@unchecked Sendable`: after `run()` the object is only read for
    /// its termination status inside its own termination handler, which Foundation calls once.
    private final class ProcessBox: @unchecked Sendable {
        let process: Process
        init(_ process: Process) { self.process = process }
    }

    private struct State {
        var standardOutput: Data?
        var exitStatus: Int32?
        var outputWaiters: [CheckedContinuation<Data, Never>] = []
        var exitWaiters: [CheckedContinuation<Int32, Never>] = []
        var box: ProcessBox?
    }

    public let pid: Int32
    private let state: Mutex<State>

    private init(pid: Int32, box: ProcessBox) {
        self.pid = pid
        self.state = Mutex(State(box: box))
    }

    /// Starts `executable`.
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
    ) throws -> FunctionProcess {
        signal(SIGPIPE, SIG_IGN)
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = environment
        let stdinPipe = Pipe()
        let stdoutPipe = Pipe()
        let stderrPipe = Pipe()
        process.standardInput = input == nil ? FileHandle.nullDevice : stdinPipe
        process.standardOutput = stdoutPipe
        process.standardError = stderrPipe
        // The process may end before the handle exists: whichever comes second delivers the exit status.
        let link = Mutex<(handle: FunctionProcess?, status: Int32?)>((nil, nil))
        process.terminationHandler = { finished in
            let status = finished.terminationStatus
            let handle = link.withLock { link -> FunctionProcess? in
                if link.handle == nil { link.status = status }
                return link.handle
            }
            handle?.finish(exitStatus: status)
        }
        try process.run()
        if let memoryLimitBytes, caregiver_push_limit_data(process.processIdentifier, UInt64(memoryLimitBytes)) != 0 {
            let error = errno
            _ = Glibc.kill(process.processIdentifier, SIGKILL)
            throw FunctionProcessError.limitNotSet(errno: error)
        }
        let handle = FunctionProcess(pid: process.processIdentifier, box: ProcessBox(process))
        let early = link.withLock { link -> Int32? in
            link.handle = handle
            return link.status
        }
        if let early { handle.finish(exitStatus: early) }

        let stdoutReader = stdoutPipe.fileHandleForReading
        blockingThread {
            handle.finish(standardOutput: stdoutReader.readDataToEndOfFile())
        }
        let stderrReader = stderrPipe.fileHandleForReading
        blockingThread {
            var buffer = Data()
            while true {
                let chunk = stderrReader.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    standardErrorLine(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                    buffer.removeSubrange(buffer.startIndex...newline)
                }
            }
            if !buffer.isEmpty { standardErrorLine(String(decoding: buffer, as: UTF8.self)) }
        }
        if let input {
            let writer = stdinPipe.fileHandleForWriting
            blockingThread {
                try? writer.write(contentsOf: input)
                try? writer.close()
            }
        }
        return handle
    }

    private func finish(standardOutput data: Data) {
        let waiters = state.withLock { state -> [CheckedContinuation<Data, Never>] in
            state.standardOutput = data
            defer { state.outputWaiters = [] }
            return state.outputWaiters
        }
        for waiter in waiters { waiter.resume(returning: data) }
    }

    private func finish(exitStatus: Int32) {
        let waiters = state.withLock { state -> [CheckedContinuation<Int32, Never>] in
            state.exitStatus = exitStatus
            state.box = nil
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
    /// Foundation starts the child as the leader of a process group of its own, so the group is signalled: a function
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

import Codecs
import FunctionRuntime
import ProcessSupervision
import CaregiverPush
import Foundation
import Synchronization

/// What became of one invocation, as the gateway needs it.
enum FunctionOutcome: Sendable {
    /// The function's response document (stdout, or the Runtime API's response body), and the process that wrote it.
    case output([UInt8], pid: Int32)
    case timedOut
    /// The function ended (or reported an error) without a response.
    case failed(String)
    /// No warm worker took the invocation before its queue deadline (none live, or all busy): a 503.
    case unavailable(retryAfterSeconds: Int)
}

/// Forwards a function's stderr to the runner's, one JSON line per line, tagged with the function and request.
struct StderrForwarder: Sendable {
    let function: String

    func forward(_ line: String, requestID: String?) {
        guard !line.isEmpty else { return }
        var members: [String: JSONValue]
        if let object = (try? JSONValue.parse(line))?.objectValue {
            members = object
        } else {
            members = ["level": .string("info"), "msg": .string(line)]
        }
        members["function"] = members["function"] ?? .string(function)
        if let requestID, members["requestId"] == nil { members["requestId"] = .string(requestID) }
        members["source"] = .string("function")
        let encoder = JSONCoding.encoder()
        guard let data = try? encoder.encode(JSONValue.object(members)) else { return }
        FileHandle.standardError.write(data + Data("\n".utf8))
    }
}

/// The function processes still running (a cold process finishing its push after its response), so that a
/// shutdown can wait for them and kill what outlives the grace period.
final class ProcessTracker: Sendable {
    private let processes = Mutex<[Int32: FunctionProcess]>([:])

    func add(_ process: FunctionProcess) { processes.withLock { $0[process.pid] = process } }
    func remove(_ process: FunctionProcess) { _ = processes.withLock { $0.removeValue(forKey: process.pid) } }
    var count: Int { processes.withLock { $0.count } }
    func killAll() { for process in processes.withLock({ Array($0.values) }) { process.kill() } }
}

/// Cold mode: one process per request, the event on stdin, the response read until stdout's EOF — which comes
/// before the process ends when the function has post-response work. The process is reaped in the background and
/// killed at its timeout.
struct ColdInvoker: Sendable {
    let binDirectory: URL
    let environment: EnvironmentBox
    let tracker: ProcessTracker

    /// - Parameter finished: called once the process has ended (its concurrency slot is then free).
    func invoke(
        _ function: FunctionTable.Function, event: [UInt8], requestID: String,
        finished: @escaping @Sendable () async -> Void
    ) async -> FunctionOutcome {
        let forwarder = StderrForwarder(function: function.name)
        let process: FunctionProcess
        do {
            process = try await FunctionProcess.launch(
                executable: binDirectory.appendingPathComponent(function.name), environment: environment.value,
                input: Data(event), memoryLimitBytes: function.memoryMB * 1024 * 1024
            ) { line in forwarder.forward(line, requestID: requestID) }
        } catch {
            await finished()
            return .failed("the function could not be started")
        }
        tracker.add(process)
        let timedOut = Atomic<Bool>(false)
        let timer = Task {
            try await Task.sleep(for: .seconds(function.timeoutSeconds))
            timedOut.store(true, ordering: .relaxed)
            process.kill()
        }
        Task {
            _ = await process.exitStatus()
            timer.cancel()
            tracker.remove(process)
            await finished()
        }
        let output = await process.standardOutput()
        if timedOut.load(ordering: .relaxed) { return .timedOut }
        guard !output.isEmpty else {
            let status = await process.exitStatus()
            return timedOut.load(ordering: .relaxed)
                ? .timedOut : .failed("the function exited (\(status)) without a response")
        }
        return .output(Array(output), pid: process.pid)
    }
}

/// The functions' environment, completed once the server knows its port (the FCM emulator's URLs name it).
final class EnvironmentBox: Sendable {
    private let storage: Mutex<[String: String]>

    init(_ environment: [String: String]) { storage = Mutex(environment) }

    var value: [String: String] { storage.withLock { $0 } }

    func merge(_ extra: [String: String]) { storage.withLock { $0.merge(extra) { _, new in new } } }
}

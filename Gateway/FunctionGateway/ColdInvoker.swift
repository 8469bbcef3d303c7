import ProcessSupervision
import Foundation
import Synchronization

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

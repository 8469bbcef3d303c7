import Codecs
import FunctionRuntime
import ProcessSupervision
import Foundation
import Logging

/// Warm mode for one function: long-lived worker processes that speak the AWS Lambda Runtime API to the gateway.
///
/// Each worker gets its own `AWS_LAMBDA_RUNTIME_API` (`127.0.0.1:PORT/<secret>`, on the gateway's private listener),
/// so the gateway knows which worker asks for the next event and no other process can ask in its name. A worker is
/// busy from the moment its `GET …/invocation/next` returns an event until it asks again — so its post-response
/// push finishes before it takes more work. The invocation's timeout covers all of that, as Lambda's does: a worker
/// still busy at the timeout is killed and replaced (its client has had its answer, or gets a 504). A worker that
/// dies is replaced. Each worker runs under the function's memory limit.
///
/// The pool heals: a worker that cannot be started, or that exits before it ever asked for an event (a broken
/// binary, a missing library, an init error), is retried with exponential backoff (``backoff(failures:)``) for as
/// long as the gateway lives, never given up on; an invocation that waits past its queue deadline with no live worker
/// is answered ``FunctionOutcome/unavailable(retryAfterSeconds:)`` (a 503 with `Retry-After`) and frees its slot; and
/// ``isLive`` (what `/readyz` reports) is false while no worker is ready.
actor WarmPool {
    struct Event: Sendable {
        let awsRequestID: String
        let deadlineMilliseconds: Int64
        let body: [UInt8]
        let clientRequestID: String
    }

    private struct Waiting {
        let event: Event
        let result: CheckedContinuation<FunctionOutcome, Never>
        let finished: @Sendable () async -> Void
        var expiry: Task<Void, Never>
    }

    private struct Worker {
        let process: FunctionProcess
        let secret: String
        /// It has asked for an event at least once: it started and initialised.
        var ready = false
        var idle: CheckedContinuation<Event?, Never>?
        /// The invocation it is working on, and what to call once it asks for more.
        var current: (awsRequestID: String, finished: @Sendable () async -> Void)?
    }

    let function: FunctionTable.Function
    private let size: Int
    private let binDirectory: URL
    private let logger: Logger
    private var runtimeAPIBase = ""
    private var environment: [String: String] = [:]
    private var workers: [Int: Worker] = [:]
    private var nextWorkerID = 0
    private var queue: [Waiting] = []
    /// Invocations from the event's hand-out until the worker asks for its next one. `result` is `nil` once the
    /// client has been answered; the timer runs until the end either way.
    private var inFlight:
        [String: (
            worker: Int, pid: Int32, result: CheckedContinuation<FunctionOutcome, Never>?, timer: Task<Void, Never>
        )] = [:]
    private var draining = false
    private let directory: WorkerDirectory
    /// Workers whose process is starting (`spawn` awaits its launch), with the `next` calls that came meanwhile.
    private var launching: [Int: [CheckedContinuation<Void, Never>]] = [:]
    /// Starts that failed in a row (a launch error, or an exit before the first `next`); reset by a ready worker.
    private var failures = 0
    /// The pending retry of a failed start, and when it is due.
    private var respawn: (task: Task<Void, Never>, due: ContinuousClock.Instant)?

    /// How long to wait before the next start after `failures` failed ones in a row: 0.2 s, doubling, at most 30 s.
    static func backoff(failures: Int) -> Duration {
        guard failures > 0 else { return .zero }
        return min(.milliseconds(200) * (1 << min(failures - 1, 16)), .seconds(30))
    }

    init(function: FunctionTable.Function, size: Int, binDirectory: URL, directory: WorkerDirectory, logger: Logger) {
        self.function = function
        self.size = max(size, 1)
        self.binDirectory = binDirectory
        self.directory = directory
        self.logger = logger
    }

    /// Starts the workers, once the Runtime API (`127.0.0.1:port`, the private listener) is listening.
    func start(environment: [String: String], runtimeAPIBase: String) async {
        self.environment = environment
        self.runtimeAPIBase = runtimeAPIBase
        for _ in 0..<size { await spawn() }
    }

    /// The process ids of the workers (tests check they are reused).
    var workerPIDs: [Int32] { workers.values.map(\.process.pid).sorted() }

    /// Starts a worker. The actor is free while the process starts: a `next` from the new worker waits for the
    /// launch to finish, and a worker that starts after `shutDown` is stopped at once.
    private func spawn() async {
        guard !draining else { return }
        nextWorkerID += 1
        let id = nextWorkerID
        var environment = environment
        let forwarder = StderrForwarder(function: function.name)
        do {
            let secret = try directory.register(pool: self, worker: id)
            environment["AWS_LAMBDA_RUNTIME_API"] = "\(runtimeAPIBase)/\(secret)"
            environment["AWS_LAMBDA_FUNCTION_NAME"] = function.name
            environment["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] = String(function.memoryMB)
            launching[id] = []
            defer { for waiter in launching.removeValue(forKey: id) ?? [] { waiter.resume() } }
            let process: FunctionProcess
            do {
                process = try await FunctionProcess.launch(
                    executable: binDirectory.appendingPathComponent(function.name), environment: environment,
                    input: nil,
                    memoryLimitBytes: function.memoryMB * 1024 * 1024
                ) { line in forwarder.forward(line, requestID: nil) }
            } catch {
                directory.remove(secret: secret)
                throw error
            }
            workers[id] = Worker(process: process, secret: secret)
            if draining { process.kill(SIGTERM) }
            Task { [weak self] in
                let status = await process.exitStatus()
                await self?.workerExited(id, status: status)
            }
        } catch {
            startFailed()
        }
    }

    /// A start failed: try again after the backoff, for as long as the pool runs.
    private func startFailed() {
        failures += 1
        let delay = Self.backoff(failures: failures)
        logger.error(
            "warm worker could not start; retrying",
            metadata: [
                "function": .string(function.name), "worker.failures": .stringConvertible(failures),
                "retry_in_ms": .stringConvertible(
                    delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000),
            ])
        scheduleRespawn(after: delay)
    }

    private func scheduleRespawn(after delay: Duration) {
        guard !draining, respawn == nil else { return }
        let task = Task { [weak self] in
            try? await Task.sleep(for: delay)
            await self?.respawnDue()
        }
        respawn = (task, .now + delay)
    }

    private func respawnDue() async {
        respawn = nil
        guard !draining else { return }
        while workers.count + launching.count < size, !draining {
            let before = failures
            await spawn()
            // The start failed again and a retry is scheduled: leave the rest to it.
            if failures > before { break }
        }
        dispatch()
    }

    /// Whether a worker is ready to take events (`/readyz`): false while none has started and initialised.
    var isLive: Bool { workers.values.contains { $0.ready } }

    /// Runs one invocation on the first worker free.
    /// - Parameter queueDeadline: when no worker has taken it by then and none is live, it is answered
    ///   ``FunctionOutcome/unavailable(retryAfterSeconds:)`` and `finished` is called (its slot is freed).
    func invoke(
        event body: [UInt8], clientRequestID: String, queueDeadline: ContinuousClock.Instant,
        finished: @escaping @Sendable () async -> Void
    ) async -> FunctionOutcome {
        let deadline = Int64((Date().timeIntervalSince1970 + Double(function.timeoutSeconds)) * 1000)
        let event = Event(
            awsRequestID: UUID.random().lowercasedText, deadlineMilliseconds: deadline, body: body,
            clientRequestID: clientRequestID)
        let awsRequestID = event.awsRequestID
        return await withCheckedContinuation { continuation in
            let expiry = Task { [weak self] in
                try? await Task.sleep(until: queueDeadline)
                await self?.expire(awsRequestID)
            }
            queue.append(Waiting(event: event, result: continuation, finished: finished, expiry: expiry))
            dispatch()
        }
    }

    /// The queue deadline of a waiting invocation passed before a worker took it. While a worker is live the
    /// invocation keeps waiting: a busy worker frees itself by its invocation's timeout at the latest (it is killed
    /// then), so the wait stays bounded, as it always was. With none live, nothing bounds it: a 503.
    private func expire(_ awsRequestID: String) async {
        guard let index = queue.firstIndex(where: { $0.event.awsRequestID == awsRequestID }) else { return }
        if isLive {
            queue[index].expiry = Task { [weak self] in
                try? await Task.sleep(for: .milliseconds(250))
                await self?.expire(awsRequestID)
            }
            return
        }
        let waiting = queue.remove(at: index)
        var retryAfter = 1
        if let respawn {
            let wait = respawn.due - .now
            retryAfter = max(1, Int(wait.components.seconds) + (wait.components.attoseconds > 0 ? 1 : 0))
        }
        logger.warning(
            "invocation waited past its queue timeout",
            metadata: [
                "function": .string(function.name), "requestId": .string(waiting.event.clientRequestID),
                "workers.ready": .stringConvertible(workers.values.filter(\.ready).count),
            ])
        waiting.result.resume(returning: .unavailable(retryAfterSeconds: retryAfter))
        await waiting.finished()
    }

    /// `GET …/invocation/next` from worker `id`: finishes its previous invocation, then waits for an event.
    /// Returns `nil` when the pool is shutting down.
    func next(worker id: Int) async -> Event? {
        if launching[id] != nil {
            await withCheckedContinuation { waiter in
                if launching[id] == nil { waiter.resume() } else { launching[id]?.append(waiter) }
            }
        }
        guard workers[id] != nil else { return nil }
        if workers[id]?.ready == false {
            workers[id]?.ready = true
            failures = 0
        }
        if let previous = workers[id]?.current {
            workers[id]?.current = nil
            if let entry = inFlight.removeValue(forKey: previous.awsRequestID) {
                entry.timer.cancel()
                // Asked for more without answering: the client gets a 502, as from Lambda.
                entry.result?.resume(returning: .failed("the worker asked for its next event without a response"))
            }
            await previous.finished()
        }
        guard !draining else { return nil }
        return await withCheckedContinuation { continuation in
            workers[id]?.idle = continuation
            dispatch()
        }
    }

    /// Hands queued events to idle workers.
    private func dispatch() {
        while !queue.isEmpty, let id = workers.first(where: { $0.value.idle != nil && $0.value.current == nil })?.key,
            let idle = workers[id]?.idle
        {
            let waiting = queue.removeFirst()
            waiting.expiry.cancel()
            workers[id]?.idle = nil
            workers[id]?.current = (waiting.event.awsRequestID, waiting.finished)
            let awsRequestID = waiting.event.awsRequestID
            let timeout = function.timeoutSeconds
            let timer = Task { [weak self] in
                try? await Task.sleep(for: .seconds(timeout))
                await self?.timeOut(awsRequestID)
            }
            inFlight[awsRequestID] = (id, workers[id]?.process.pid ?? 0, waiting.result, timer)
            idle.resume(returning: waiting.event)
        }
    }

    /// `POST …/invocation/{id}/response` from worker `worker`: answers the client. The invocation goes on (and its
    /// timeout keeps running) until the worker asks for its next event.
    func respond(_ awsRequestID: String, worker: Int, body: [UInt8]) -> Bool {
        guard let result = takeResult(awsRequestID, worker: worker) else { return false }
        result.resume(returning: .output(body, pid: inFlight[awsRequestID]?.pid ?? 0))
        return true
    }

    /// `POST …/invocation/{id}/error` from worker `worker`.
    func fail(_ awsRequestID: String, worker: Int, errorType: String) -> Bool {
        guard let result = takeResult(awsRequestID, worker: worker) else { return false }
        result.resume(returning: .failed("the function reported \(errorType)"))
        return true
    }

    /// The client's continuation of an invocation of `worker` not yet answered; `nil` for another worker's id, an
    /// unknown one, or one already answered.
    private func takeResult(_ awsRequestID: String, worker: Int) -> CheckedContinuation<FunctionOutcome, Never>? {
        guard let entry = inFlight[awsRequestID], entry.worker == worker, let result = entry.result else { return nil }
        inFlight[awsRequestID]?.result = nil
        return result
    }

    /// `POST …/runtime/init/error`: the worker cannot serve; it is stopped and replaced.
    func initFailed(worker id: Int, errorType: String) {
        logger.error(
            "warm worker init error", metadata: ["function": .string(function.name), "error.type": .string(errorType)])
        workers[id]?.process.kill()
    }

    /// The invocation's timeout has passed before its worker asked for more: the worker is killed (and replaced
    /// when its exit is seen), whether or not its client has been answered.
    private func timeOut(_ awsRequestID: String) {
        guard let entry = inFlight.removeValue(forKey: awsRequestID) else { return }
        if let result = entry.result {
            result.resume(returning: .timedOut)
        } else {
            logger.warning(
                "post-response work exceeded the timeout; worker killed",
                metadata: [
                    "function": .string(function.name), "timeout_s": .stringConvertible(function.timeoutSeconds),
                ])
        }
        workers[entry.worker]?.process.kill()
    }

    private func workerExited(_ id: Int, status: Int32) async {
        guard let worker = workers.removeValue(forKey: id) else { return }
        directory.remove(secret: worker.secret)
        worker.idle?.resume(returning: nil)
        if let current = worker.current {
            if let entry = inFlight.removeValue(forKey: current.awsRequestID) {
                entry.timer.cancel()
                entry.result?.resume(returning: .failed("the warm worker exited (\(status)) during the invocation"))
            }
            await current.finished()
        }
        guard !draining else { return }
        if worker.ready {
            logger.warning(
                "warm worker replaced",
                metadata: ["function": .string(function.name), "exit": .stringConvertible(status)])
            // A pending retry replaces it in its time; otherwise at once.
            if respawn == nil { await spawn() }
            dispatch()
        } else {
            // It never asked for an event: it cannot start. Retrying at once would spin.
            logger.warning(
                "warm worker exited before its first event",
                metadata: ["function": .string(function.name), "exit": .stringConvertible(status)])
            startFailed()
        }
    }

    /// Whether any invocation is queued or running (post-response work included).
    var isBusy: Bool { !queue.isEmpty || workers.values.contains { $0.current != nil } }

    /// Stops taking work: idle workers are released from their long poll and all workers are terminated.
    func shutDown() {
        draining = true
        respawn?.task.cancel()
        respawn = nil
        for waiting in queue {
            waiting.expiry.cancel()
            waiting.result.resume(returning: .failed("the gateway is shutting down"))
            Task { await waiting.finished() }
        }
        queue.removeAll()
        for (id, worker) in workers {
            worker.idle?.resume(returning: nil)
            workers[id]?.idle = nil
            worker.process.kill(SIGTERM)
        }
    }

    /// Ends idle workers so that their replacements start from the current binary; busy ones finish first.
    func restartWorkers() {
        for worker in workers.values where worker.current == nil { worker.process.kill(SIGTERM) }
    }

    func killAll() {
        for worker in workers.values { worker.process.kill() }
    }
}

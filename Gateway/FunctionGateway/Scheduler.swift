import Codecs
import ProcessSupervision
import Foundation
import Logging
import Synchronization

/// Runs each scheduled function of the table at its rate, the way an EventBridge Schedule rule invokes a Lambda
/// function: an EventBridge "Scheduled Event" as the event, through
/// ``Gateway/invoke(_:event:requestID:finished:)`` — the same concurrency gate, cold process or warm worker,
/// timeout and kill rules as a request.
///
/// The first run comes one interval after the start, as a new rule's does. A tick that finds the function's previous
/// run still going (post-response work included) is skipped and logged: runs of one function never overlap here,
/// although EventBridge allows it and the functions must tolerate it. The output is not an HTTP response and is
/// never parsed as one: only whether it is JSON, and the numbers at its top level (a summary's counts), are logged.
package final class Scheduler: Sendable {
    /// How `gateway serve` was asked to schedule.
    package enum Setting: Sendable, Equatable {
        /// Each function at its `schedule` from the table.
        case table
        /// Every scheduled function at this interval instead (`--schedule-interval-ms`).
        case every(Duration)
        /// No scheduled runs at all (`--no-schedules`).
        case off
    }

    struct Entry: Sendable {
        let function: FunctionTable.Function
        let interval: Duration
    }

    let entries: [Entry]
    private let gateway: Gateway
    private let region: String
    private let logger: Logger
    /// The functions with a run in progress, and whether ``stop()`` was called: one lock, so that no run can begin
    /// after `stop()` returns.
    private let state = Mutex<(running: Set<String>, stopped: Bool)>(([], false))
    private let ticker = Mutex<Task<Void, Never>?>(nil)

    init(table: FunctionTable, setting: Setting, gateway: Gateway, region: String, logger: Logger) {
        self.entries = table.functions.compactMap { function in
            guard let rate = function.rate else { return nil }
            switch setting {
            case .table: return Entry(function: function, interval: rate)
            case .every(let interval): return Entry(function: function, interval: interval)
            case .off: return nil
            }
        }
        self.gateway = gateway
        self.region = region
        self.logger = logger
    }

    /// Starts ticking (once the functions' environment is complete and the warm workers are started).
    func start() {
        for entry in entries {
            logger.info(
                "schedule",
                metadata: [
                    "function": .string(entry.function.name),
                    "schedule.expression": .string(entry.function.schedule ?? ""),
                    "schedule.interval_ms": .stringConvertible(Int64(Self.milliseconds(entry.interval))),
                ])
        }
        ticker.withLock { task in
            guard task == nil, !entries.isEmpty else { return }
            task = Task {
                await withDiscardingTaskGroup { group in
                    for entry in entries { group.addTask { await self.tick(entry) } }
                }
            }
        }
    }

    /// Stops ticking: no run begins after this returns. Runs in progress go on; the drain waits for them
    /// (``hasRunsInProgress``) like for any function work, and kills what outlives the grace period.
    func stop() {
        state.withLock { $0.stopped = true }
        ticker.withLock { $0?.cancel() }
    }

    var hasRunsInProgress: Bool { state.withLock { !$0.running.isEmpty } }

    private func tick(_ entry: Entry) async {
        let clock = ContinuousClock()
        var next = clock.now + entry.interval
        while true {
            do { try await clock.sleep(until: next) } catch { return }
            next += entry.interval
            // Ticks missed while the gateway could not run (a suspended laptop) are not made up.
            if next < clock.now { next = clock.now + entry.interval }
            let name = entry.function.name
            let admitted = state.withLock { state -> Bool? in
                guard !state.stopped else { return nil }
                return state.running.insert(name).inserted
            }
            switch admitted {
            case nil: return
            case false?:
                logger.info(
                    "scheduled run skipped: the previous run is still going", metadata: ["function": .string(name)])
            case true?:
                // Not awaited: the ticker keeps time (and skips) while the run goes on.
                Task { await self.run(entry.function) }
            }
        }
    }

    private func run(_ function: FunctionTable.Function) async {
        let started = ContinuousClock.now
        let id = UUID.random().lowercasedText
        let event = EventBuilder.scheduledEvent(function: function.name, id: id, region: region, now: Date())
        // The run ends when the invocation does (the process exits, or the warm worker asks for more), not when
        // the output arrives.
        let (ended, end) = AsyncStream<Never>.makeStream()
        let result = await gateway.invoke(function, event: event, requestID: id) { end.finish() }
        for await _ in ended {}
        var metadata: Logger.Metadata = [
            "function": .string(function.name), "requestId": .string(id), "mode": .string(gateway.mode.rawValue),
            "duration_ms": .stringConvertible(Self.milliseconds(ContinuousClock.now - started)),
        ]
        switch result {
        case .output(let output, _)?:
            metadata["outcome"] = "completed"
            metadata.merge(Self.summary(of: output)) { _, new in new }
            logger.info("scheduled run", metadata: metadata)
        case .timedOut?:
            metadata["outcome"] = "timed out"
            logger.warning("scheduled run", metadata: metadata)
        case .failed(let reason)?:
            metadata["outcome"] = "failed"
            metadata["reason"] = .string(reason)
            logger.warning("scheduled run", metadata: metadata)
        case .unavailable?, nil:
            metadata["outcome"] = "throttled"
            logger.warning("scheduled run", metadata: metadata)
        }
        state.withLock { _ = $0.running.remove(function.name) }
    }

    /// What may be logged of a scheduled function's output: whether it is JSON, and the numeric members of a
    /// top-level object under plain names (`summary.sent`). Never any text of it: the output is the function's.
    static func summary(of output: [UInt8]) -> Logger.Metadata {
        guard let document = try? JSONValue.parse(output, maxDepth: 64) else {
            return ["output.json": .stringConvertible(false)]
        }
        var metadata: Logger.Metadata = ["output.json": .stringConvertible(true)]
        let plainName = /[A-Za-z][A-Za-z0-9_]{0,63}/
        for (name, value) in (document.objectValue ?? [:]).sorted(by: { $0.key < $1.key }).prefix(32)
        where (try? plainName.wholeMatch(in: name)) != nil {
            guard case .number(let number) = value, number.isFinite else { continue }
            metadata["summary.\(name)"] =
                number.rounded() == number && abs(number) < 1e15
                ? .stringConvertible(Int64(number)) : .stringConvertible(number)
        }
        return metadata
    }

    static func milliseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return ((Double(seconds) * 1000 + Double(attoseconds) / 1e15) * 10).rounded() / 10
    }
}

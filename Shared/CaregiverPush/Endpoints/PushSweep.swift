import Libpq
import FoundationEssentials
import Logging

/// `push-sweep` — the scheduled function that finishes what the recording functions' senders left
/// (docs/behaviour.md#sweep). Run every minute (`infra/functions.json`); two runs may overlap, and that is safe.
///
/// One run, in this order:
/// 1. disables devices not seen for `PUSH_DEVICE_STALE_DAYS` (`STALE`), so they are not sent to;
/// 2. ends the due deliveries of devices disabled since their event as `FAILED` (the reason says so);
/// 3. marks `EXPIRED` what is due but whose event is older than `PUSH_MAX_AGE_SECONDS`: never sent late;
/// 4. leases due deliveries in batches of `PUSH_SWEEP_BATCH_SIZE` (`FOR UPDATE SKIP LOCKED`: two sweeps never hold
///    the same delivery) and sends them through the recording functions' own path, until nothing is due or its
///    time is up: the next batch is leased while the last is still in flight (no stop-and-wait per batch), sends
///    start at most `PUSH_SWEEP_SEND_RATE` a second, and a 429 with `Retry-After` pauses all of them;
/// 5. deletes final deliveries, then events without deliveries, older than `PUSH_RETENTION_DAYS`.
///
/// Every step works in bounded batches. The summary (counts) is the invocation's response.
public struct PushSweep: ScheduledJob {
    public let functionName = "push-sweep"

    public init() {}

    /// The run's counts: its response, and its metrics.
    public struct Summary: Codable, Sendable, Equatable {
        public var devicesPruned = 0
        public var disabledDeviceDeliveries = 0
        public var expired = 0
        public var batches = 0
        public var leased = 0
        public var sent = 0
        public var failed = 0
        public var disabled = 0
        public var retryScheduled = 0
        public var deliveriesDeleted = 0
        public var eventsDeleted = 0
        /// Disabled devices deleted after `PUSH_RETENTION_DAYS`.
        public var devicesDeleted = 0
        /// Why the run stopped early, when it did (`database`, `environment`, …); counts so far are still true.
        public var stoppedEarly: String?
    }

    public func run(context: InvocationContext) -> any Encodable & Sendable {
        let configuration = context.configuration
        let runDeadline = min(
            ContinuousClock.now + .milliseconds(configuration.pushSweepTimeLimitMilliseconds),
            context.deadline.map { $0 - PushDispatcher.hostDeadlineMargin } ?? .now + .seconds(86_400))
        var summary = Summary()
        let maintenance = DeliveryMaintenance(configuration: configuration, database: context.database)
        do {
            summary.devicesPruned = try maintenance.pruneStaleDevices()
            summary.disabledDeviceDeliveries = try maintenance.endDisabledDeviceDeliveries()
            summary.expired = try maintenance.expireOldDeliveries()
        } catch {
            return stopped(summary, "database", error: error, context: context)
        }
        let dispatcher = PushDispatcher(configuration: configuration, logger: context.logger)
        let (report, stoppedEarly) = dispatcher.sweep(
            until: runDeadline, database: context.database, push: context.push)
        summary.stoppedEarly = stoppedEarly
        summary.batches = report.leases
        summary.leased = report.leased
        summary.sent = report.sent
        summary.failed = report.failed
        summary.disabled = report.disabled
        summary.retryScheduled = report.retryScheduled
        do {
            (summary.deliveriesDeleted, summary.eventsDeleted) = try maintenance.deleteOldFinalRows()
            summary.devicesDeleted = try maintenance.deleteOldDisabledDevices()
        } catch {
            return stopped(summary, "database", error: error, context: context, report: report)
        }
        return finished(summary, report: report, context: context)
    }

    private func stopped(
        _ summary: Summary, _ reason: String, error: any Error, context: InvocationContext,
        report: PushDispatcher.Report = .init()
    ) -> Summary {
        var summary = summary
        summary.stoppedEarly = reason
        context.logger.error("push sweep stopped early", metadata: ErrorMetadata.of(error))
        return finished(summary, report: report, context: context)
    }

    private func finished(_ summary: Summary, report: PushDispatcher.Report, context: InvocationContext) -> Summary {
        report.record(in: context.metrics)
        context.metrics.add(.sweepLeased, summary.leased)
        context.metrics.add(.pushExpired, summary.expired)
        context.metrics.add(.devicesPruned, summary.devicesPruned)
        context.logger.info(
            "push sweep finished",
            metadata: [
                "sweep.leased": .stringConvertible(summary.leased), "sweep.sent": .stringConvertible(summary.sent),
                "sweep.expired": .stringConvertible(summary.expired),
                "sweep.pruned": .stringConvertible(summary.devicesPruned),
                "sweep.deleted": .stringConvertible(summary.deliveriesDeleted),
            ])
        return summary
    }
}

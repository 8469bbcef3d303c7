import Codecs
import FoundationEssentials
import Libpq
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
///    start at most `PUSH_SWEEP_SEND_RATE` a second, and a 429 with `Retry-After` pauses all of them; with
///    `PUSH_SWEEP_STAY=on`, when nothing is due it stays, and sends each delivery as it falls due (a recording's
///    retry) until its time is up; with `PUSH_FIRST_SEND=sweep` too, it sends what recordings queue, leasing every
///    ``PushDispatcher/firstSendSpacing`` while earlier sends are still in flight;
/// 5. deletes final deliveries, then events without deliveries, older than `PUSH_RETENTION_DAYS`.
///
/// Every step works in bounded batches. The summary (counts) is the invocation's response.
public struct PushSweep: ScheduledJob {
    public static let function = FunctionName.pushSweep

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

    public func run(context: InvocationContext) -> Summary {
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
        report: DeliveryReport = .init()
    ) -> Summary {
        var summary = summary
        summary.stoppedEarly = reason
        context.logger.error("push sweep stopped early", metadata: ErrorMetadata.of(error))
        return finished(summary, report: report, context: context)
    }

    private func finished(_ summary: Summary, report: DeliveryReport, context: InvocationContext) -> Summary {
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

extension PushDispatcher {
    /// `push-sweep`'s sending step (docs/behaviour.md#sweep): leases due deliveries of any event in batches of
    /// `PUSH_SWEEP_BATCH_SIZE` and sends them, the next batch leased while the last is still in flight, sends paced
    /// at `PUSH_SWEEP_SEND_RATE`, until nothing is due — or, with `PUSH_SWEEP_STAY=on`, sending whatever falls due
    /// meanwhile as it does, until less time is left than a batch needs. A pause FCM asked for is waited out when the run has time left after it.
    /// - Returns: the counts, and why sending stopped early when it did (`throttled`, or a skipped step's reason).
    func sweep(
        until runDeadline: ContinuousClock.Instant, database: DatabaseSession, push: PushResources
    ) -> (report: DeliveryReport, stoppedEarly: String?) {
        var report = DeliveryReport()
        // A batch needs time to be worth leasing: its leases would otherwise only run out.
        let minimumBatchTime = Duration.milliseconds(min(configuration.pushSendDeadlineMilliseconds, 2000))
        let pacer = SendPacer(perSecond: configuration.pushSweepSendRate)
        while runDeadline - .now >= minimumBatchTime {
            // FCM asked this sender to pause (429 with Retry-After): wait it out when the run has time left after it.
            if let pausedUntil = (try? push.httpClient())?.pausedUntil, pausedUntil > .now {
                guard runDeadline - pausedUntil >= minimumBatchTime else { return (report, "throttled") }
                ThreadSleep.sleep(until: pausedUntil)
            }
            // Leases keep coming while earlier sends are in flight (at most two batches outstanding), paced below
            // FCM's quota; the loop goes round again only after a pause FCM asked for.
            let leasedAt = ContinuousClock.now
            let batch = run(
                limit: configuration.pushSweepBatchSize, eventKey: nil, database: database, push: push,
                deadline: min(sendDeadline(hostDeadline: nil), runDeadline), logger: logger,
                continuation: .init(
                    runDeadline: runDeadline, minimumLeaseTime: minimumBatchTime, pacer: pacer,
                    leaseSpacing: configuration.pushFirstSend == .sweep ? Self.firstSendSpacing : nil))
            if let reason = batch.skippedReason { return (report, reason) }
            report.add(batch)
            if batch.moreDue { continue }
            guard configuration.pushSweepStays else { break }
            if configuration.pushFirstSend == .sweep {
                // The recordings' deliveries are this run's to send first: it leases whatever is due every
                // `firstSendSpacing` (while sends are in flight, inside the run; between runs, here), a batch of
                // recordings per lease, without asking first when that will be.
                let last = batch.lastLeaseAt ?? leasedAt
                ThreadSleep.sleep(until: min(last + Self.firstSendSpacing, runDeadline - minimumBatchTime))
                continue
            }
            // Nothing more due now: the run stays (`PUSH_SWEEP_STAY`), so that a retry the recordings' senders leave
            // (due after its back-off) is sent when it falls due rather than at the next minute's run. It sleeps
            // until the next delivery known to fall due, and looks again at least every `sweepPollInterval`.
            let waitUntil = min(ContinuousClock.now + Self.sweepPollInterval, runDeadline - minimumBatchTime)
            guard waitUntil > .now else { break }
            do {
                let nextDue = try DeliveryQueue.millisecondsToNextDue(database: database)
                let due = ContinuousClock.now + .milliseconds(max(nextDue ?? Int.max / 2, 0))
                // Retries falling due close together go out in one lease rather than one lease each.
                ThreadSleep.sleep(until: min(waitUntil, max(due, leasedAt + Self.sweepLeaseSpacing)))
            } catch {
                return (report, "database")
            }
        }
        return (report, nil)
    }

    /// How often a sweep with nothing due looks for deliveries that fell due: shorter than the shortest back-off
    /// (``RetryPolicy/baseBackoff`` / 2), so that a retry written after the sweep's last look is still seen before
    /// it is due.
    static let sweepPollInterval = Duration.milliseconds(200)

    /// The shortest time between two leases of a staying sweep: what falls due within it waits for the next lease,
    /// at most this long, so that a stream of retries costs a lease statement per batch, not per retry.
    static let sweepLeaseSpacing = Duration.milliseconds(100)

    /// The time between two leases of a staying sweep that sends the recordings' deliveries first
    /// (`PUSH_FIRST_SEND=sweep`): what a recording queues waits at most this long for its lease (25 ms on average).
    static let firstSendSpacing = Duration.milliseconds(50)
}

/// The push queue's bookkeeping that `push-sweep` runs around its sends (docs/behaviour.md#sweep): devices gone
/// stale, deliveries that can no longer be sent, and rows past their retention. Each statement runs in its own
/// bounded transaction over a bounded batch, with `FOR UPDATE SKIP LOCKED`, so overlapping sweeps are safe.
struct DeliveryMaintenance {
    /// Rows one statement touches, and how many such statements one step may run.
    static let rowsPerStatement = 1000
    static let roundsPerStep = 10

    let configuration: Configuration
    let database: DatabaseSession

    /// Runs `statement` until it touches fewer than a batch of rows, at most ``roundsPerStep`` times.
    private func rounds(_ statement: () -> PostgresQuery) throws -> Int {
        var total = 0
        for _ in 0..<Self.roundsPerStep {
            let touched = try database.withTransaction { try $0.query(statement()).affectedRows }
            total += touched
            if touched < Self.rowsPerStatement { break }
        }
        return total
    }

    /// Devices not seen for `PUSH_DEVICE_STALE_DAYS`: Android tokens expire at 270 days, and Google advises
    /// treating older tokens as dead.
    func pruneStaleDevices() throws -> Int {
        try rounds {
            """
            WITH stale AS (
                SELECT id FROM caregiver_push.push_devices
                WHERE is_enabled AND last_seen_at < now() - make_interval(days => \(configuration.pushDeviceStaleDays))
                ORDER BY last_seen_at LIMIT \(Self.rowsPerStatement)
                FOR UPDATE SKIP LOCKED
            )
            UPDATE caregiver_push.push_devices d
            SET is_enabled = false, disabled_reason = 'STALE', updated_at = now()
            FROM stale WHERE d.id = stale.id
            """
        }
    }

    /// Due deliveries whose device was disabled after the event was written: never sent, and the reason kept.
    func endDisabledDeviceDeliveries() throws -> Int {
        try rounds {
            """
            WITH orphaned AS (
                SELECT p.id FROM caregiver_push.push_deliveries p
                JOIN caregiver_push.push_devices d ON d.id = p.push_device_id
                WHERE NOT d.is_enabled
                  AND p.status IN ('PENDING', 'SENDING') AND NOT (p.status = 'SENDING' AND p.lease_until > now())
                LIMIT \(Self.rowsPerStatement)
                FOR UPDATE OF p SKIP LOCKED
            )
            UPDATE caregiver_push.push_deliveries p
            SET status = 'FAILED', last_error = 'device disabled (' || d.disabled_reason || ') before sending',
                lease_until = NULL, lease_token = NULL, updated_at = now()
            FROM orphaned, caregiver_push.push_devices d
            WHERE p.id = orphaned.id AND d.id = p.push_device_id
            """
        }
    }

    /// Due deliveries whose event is older than `PUSH_MAX_AGE_SECONDS`: a late "just took the medicine" would
    /// mislead, so they are never sent.
    func expireOldDeliveries() throws -> Int {
        try rounds {
            """
            WITH old AS (
                SELECT p.id FROM caregiver_push.push_deliveries p
                JOIN caregiver_push.push_events e ON e.event_key = p.event_key
                WHERE p.status IN ('PENDING', 'SENDING') AND NOT (p.status = 'SENDING' AND p.lease_until > now())
                  AND e.created_at <= now() - make_interval(secs => \(configuration.pushMaxAgeSeconds))
                LIMIT \(Self.rowsPerStatement)
                FOR UPDATE OF p SKIP LOCKED
            )
            UPDATE caregiver_push.push_deliveries p
            SET status = 'EXPIRED',
                last_error = CASE WHEN p.last_error IS NULL THEN 'expired: not sent within PUSH_MAX_AGE_SECONDS'
                             ELSE 'expired after ' || p.attempts || ' attempts; last: ' || p.last_error END,
                lease_until = NULL, lease_token = NULL, updated_at = now()
            FROM old WHERE p.id = old.id
            """
        }
    }

    /// Devices disabled (or last changed while disabled) before the retention: their reason has been shown long
    /// enough. Their deliveries go with them (all final by then: the sweep ends a disabled device's due ones).
    func deleteOldDisabledDevices() throws -> Int {
        try rounds {
            """
            WITH old AS (
                SELECT id FROM caregiver_push.push_devices
                WHERE NOT is_enabled
                  AND updated_at < now() - make_interval(days => \(configuration.pushRetentionDays))
                ORDER BY updated_at LIMIT \(Self.rowsPerStatement)
                FOR UPDATE SKIP LOCKED
            )
            DELETE FROM caregiver_push.push_devices d USING old WHERE d.id = old.id
            """
        }
    }

    /// Final deliveries last changed before the retention, then events older than it with no delivery left.
    /// Nothing owed is ever deleted: an event goes only once all its deliveries have.
    func deleteOldFinalRows() throws -> (deliveries: Int, events: Int) {
        let days = configuration.pushRetentionDays
        let deliveries = try rounds {
            """
            WITH old AS (
                SELECT id FROM caregiver_push.push_deliveries
                WHERE status IN ('SENT', 'FAILED', 'DISABLED_TOKEN', 'EXPIRED')
                  AND updated_at < now() - make_interval(days => \(days))
                LIMIT \(Self.rowsPerStatement)
            )
            DELETE FROM caregiver_push.push_deliveries p USING old WHERE p.id = old.id
            """
        }
        let events = try rounds {
            """
            WITH old AS (
                SELECT e.event_key FROM caregiver_push.push_events e
                WHERE e.created_at < now() - make_interval(days => \(days))
                  AND NOT EXISTS (SELECT 1 FROM caregiver_push.push_deliveries p WHERE p.event_key = e.event_key)
                LIMIT \(Self.rowsPerStatement)
                FOR UPDATE SKIP LOCKED
            )
            DELETE FROM caregiver_push.push_events e USING old WHERE e.event_key = old.event_key
            """
        }
        return (deliveries, events)
    }
}

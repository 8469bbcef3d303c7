import Codecs

extension PushDispatcher {
    /// `push-sweep`'s sending step (docs/behaviour.md#sweep): leases due deliveries of any event in batches of
    /// `PUSH_SWEEP_BATCH_SIZE` and sends them, the next batch leased while the last is still in flight, sends paced
    /// at `PUSH_SWEEP_SEND_RATE`, until nothing is due or less time is left than a batch needs. A pause FCM asked for
    /// is waited out when the run has time left after it.
    /// - Returns: the counts, and why sending stopped early when it did (`throttled`, or a skipped step's reason).
    func sweep(
        until runDeadline: ContinuousClock.Instant, database: DatabaseSession, push: PushResources
    ) -> (report: Report, stoppedEarly: String?) {
        var report = Report()
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
            let batch = run(
                limit: configuration.pushSweepBatchSize, eventKey: nil, database: database, push: push,
                deadline: min(sendDeadline(hostDeadline: nil), runDeadline), logger: logger,
                continuation: .init(runDeadline: runDeadline, minimumLeaseTime: minimumBatchTime, pacer: pacer))
            if let reason = batch.skippedReason { return (report, reason) }
            report.add(batch)
            if !batch.moreDue { break }
        }
        return (report, nil)
    }
}

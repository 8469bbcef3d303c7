import FunctionRuntime

/// What one dispatch (or one sweep batch) did, for logs, metrics, tests and benchmarks.
public struct DeliveryReport: Equatable, Sendable {
    public var leased = 0
    public var sent = 0
    public var disabled = 0
    public var failed = 0
    /// Back to `PENDING` for a later attempt.
    public var retryScheduled = 0
    public var connectionsOpened = 0
    /// Leases taken (a sweep's run takes several while it sends).
    public var leases = 0
    /// The run stopped taking leases for a pause FCM asked for, not for want of due deliveries.
    public var moreDue = false
    public var skippedReason: String?
    /// When the run took its last lease (a sweep that sends first spaces its next from it).
    var lastLeaseAt: ContinuousClock.Instant?

    mutating func add(_ other: DeliveryReport) {
        leased += other.leased
        sent += other.sent
        disabled += other.disabled
        failed += other.failed
        retryScheduled += other.retryScheduled
        connectionsOpened += other.connectionsOpened
        leases += other.leases
    }

    /// Adds the push counters to an invocation's metrics.
    func record(in metrics: InvocationMetrics?) {
        metrics?.add(.pushSent, sent)
        metrics?.add(.pushFailed, failed)
        metrics?.add(.pushDisabled, disabled)
        metrics?.add(.pushRetryScheduled, retryScheduled)
    }
}

import FunctionRuntime

/// The push's and the sweep's metrics: the domain's names on the invocation's EMF line, listed in this order after
/// the runtime's own (`ColdStart`, `DurationMs`).
extension InvocationMetrics.Name {
    static let pushSent = Self(counter: "PushSent", rank: 0)
    static let pushFailed = Self(counter: "PushFailed", rank: 1)
    static let pushDisabled = Self(counter: "PushDisabled", rank: 2)
    /// Deliveries returned to PENDING for a later attempt (a transient failure, the deadline).
    static let pushRetryScheduled = Self(counter: "PushRetryScheduled", rank: 3)
    static let pushExpired = Self(counter: "PushExpired", rank: 4)
    static let sweepLeased = Self(counter: "SweepLeased", rank: 5)
    static let devicesPruned = Self(counter: "DevicesPruned", rank: 6)
}

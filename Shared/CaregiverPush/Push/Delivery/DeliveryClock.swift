import Codecs

/// The time a ``DeliveryRun`` goes by: the continuous clock in production, a hand-moved one in the unit tests.
protocol DeliveryClock {
    var now: ContinuousClock.Instant { get }
    /// Blocks the sender until `instant` (a pause FCM asked for, before leasing anything).
    func sleep(until instant: ContinuousClock.Instant)
}

/// The process's own clock.
struct SystemDeliveryClock: DeliveryClock {
    var now: ContinuousClock.Instant { .now }

    func sleep(until instant: ContinuousClock.Instant) {
        ThreadSleep.sleep(until: instant)
    }
}

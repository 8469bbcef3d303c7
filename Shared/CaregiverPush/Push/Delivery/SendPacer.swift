/// Spaces sends to at most `rate` a second, allowing a burst of a tenth of a second's worth: the generic cell rate
/// algorithm, a theoretical arrival time that each paced send moves on by one interval. `push-sweep` paces its
/// sends with it (`PUSH_SWEEP_SEND_RATE`), below FCM's project quota.
final class SendPacer {
    let interval: Duration
    /// How far ahead of the theoretical arrival time a send may start.
    let burst: Duration
    private var theoreticalArrival: ContinuousClock.Instant

    /// - Parameter start: the instant pacing starts from (a run's clock's now).
    init(perSecond rate: Int, start: ContinuousClock.Instant = .now) {
        let rate = max(rate, 1)
        theoreticalArrival = start
        interval = .seconds(1) / rate
        burst = interval * max(rate / 10 - 1, 0)
    }

    /// When the next send may start, at `due` or later.
    func slot(notBefore due: ContinuousClock.Instant) -> ContinuousClock.Instant {
        let start = max(due, theoreticalArrival - burst)
        theoreticalArrival = max(theoreticalArrival, start) + interval
        return start
    }
}

@testable import CaregiverPush

/// A clock that moves only when told: by ``ScriptedFCM`` as its requests start and end, and by a sender's sleep.
final class ManualClock: DeliveryClock {
    let origin = ContinuousClock.now
    private(set) var now: ContinuousClock.Instant
    /// The instants a sender slept until.
    private(set) var sleeps: [ContinuousClock.Instant] = []

    init() { now = origin }

    func sleep(until instant: ContinuousClock.Instant) {
        sleeps.append(instant)
        advance(to: instant)
    }

    func advance(to instant: ContinuousClock.Instant) {
        if instant > now { now = instant }
    }

    /// `duration` after the clock's origin.
    func at(_ duration: Duration) -> ContinuousClock.Instant { origin + duration }

    /// Milliseconds from the origin to `instant`.
    func milliseconds(_ instant: ContinuousClock.Instant) -> Int { (instant - origin).milliseconds }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Blocking sleeps for the synchronous functions, which have nothing else to do meanwhile (FoundationEssentials has
/// no `Thread.sleep`). The one place a thread sleeps: `nanosleep`, resumed after a signal interrupts it.
public enum ThreadSleep {
    /// Blocks the calling thread for `duration`; nothing for a duration that is not positive.
    public static func sleep(for duration: Duration) {
        guard duration > .zero else { return }
        var request = timespec(
            tv_sec: Int(duration.components.seconds), tv_nsec: Int(duration.components.attoseconds / 1_000_000_000))
        var remainder = timespec()
        while nanosleep(&request, &remainder) != 0, errno == EINTR { request = remainder }
    }

    /// Blocks the calling thread until `instant`; nothing when it has passed.
    public static func sleep(until instant: ContinuousClock.Instant) {
        sleep(for: instant - .now)
    }
}

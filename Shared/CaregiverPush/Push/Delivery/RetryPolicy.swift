import FoundationEssentials

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How often and how late a delivery is tried again (docs/behaviour.md#sending-retries): within one lease at most
/// ``maxAttemptsPerLease`` attempts, spaced by an exponential back-off with jitter; between leases the next back-off.
struct RetryPolicy {
    /// Attempts per device within one lease, the first included (the Admin SDKs retry 4 times).
    static let maxAttemptsPerLease = 5
    /// First back-off; doubled for each further attempt.
    static let baseBackoff: TimeInterval = 0.5
    /// The longest back-off between two leases of one delivery.
    static let maxBackoff: TimeInterval = 300

    var maxAttemptsPerLease = Self.maxAttemptsPerLease
    var baseBackoff = Self.baseBackoff
    var maxBackoff = Self.maxBackoff
    /// Where in its random half a back-off falls, from 0 to 1: random in production, fixed in the unit tests.
    var jitter: () -> Double = { Double.random(in: 0...1) }

    /// Exponential back-off with jitter ("equal jitter": half fixed, half random), never shorter than `Retry-After`,
    /// never longer than ``maxBackoff`` (unless `Retry-After` says so).
    func backoff(afterAttempt attempt: Int, retryAfter: TimeInterval?) -> Duration {
        let exponential = min(baseBackoff * pow(2, Double(min(max(attempt - 1, 0), 20))), maxBackoff)
        let jittered = exponential / 2 + jitter() * (exponential / 2)
        return .milliseconds(Int(max(jittered, retryAfter ?? 0) * 1000))
    }
}

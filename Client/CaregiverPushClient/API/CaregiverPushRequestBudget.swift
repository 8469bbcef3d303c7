import Foundation

/// How long one toggle may take, from tap to state: the caregiver is promised 5 seconds, so each call of the API
/// client is bounded by ``total``, split into attempts of at most ``attemptTimeout``, with a retry after a transport
/// failure or a 5xx only while the budget lasts. Register and unregister are idempotent on the server, so a retry
/// never registers twice.
public struct CaregiverPushRequestBudget: Sendable, Hashable {
    /// The whole call, retries included, in seconds.
    public var total: TimeInterval
    /// One attempt, in seconds (an attempt never runs past the end of ``total``).
    public var attemptTimeout: TimeInterval
    /// The pause before a retry, in seconds.
    public var retryDelay: TimeInterval

    public init(total: TimeInterval, attemptTimeout: TimeInterval, retryDelay: TimeInterval = 0.25) {
        self.total = total
        self.attemptTimeout = min(attemptTimeout, total)
        self.retryDelay = retryDelay
    }

    /// The toggle's budget: 5 s in all, 2 s per attempt, so that a lost first attempt still leaves a whole second one and the
    /// screen its state before the 5 s are up. Whole seconds: URLSession on Linux (libcurl) rounds a timeout down to
    /// one, and the kit behaves the same on both.
    public static let standard = CaregiverPushRequestBudget(total: 5, attemptTimeout: 2)
}

import Curl

/// Where a ``DeliveryRun``'s requests go: the process's ``CurlClient`` in production, an in-memory FCM in the unit
/// tests. It starts each scheduled request no sooner than its due instant (nor during a sender pause), reports every
/// request exactly once, and owns the sender pause, which outlives one run (a warm process keeps its client).
protocol DeliveryTransport: AnyObject {
    /// Requests scheduled and not yet reported: waiting to start, or on the wire.
    var outstanding: Int { get }
    /// No request starts before this instant: FCM asked this sender to slow down (``throttle(until:)``).
    var pausedUntil: ContinuousClock.Instant? { get }
    /// Holds back everything waiting, and everything scheduled later, until `instant`.
    func throttle(until instant: ContinuousClock.Instant)
    /// Queues `request` to start at `due`; it is reported `.notStarted` if it cannot start before `notAfter`, and its
    /// attempt ends there at the latest.
    func schedule(
        _ request: CurlRequest, tag: Int, at due: ContinuousClock.Instant, timeoutMilliseconds: Int,
        notAfter: ContinuousClock.Instant?)
    /// Runs every scheduled request to its end, calling `completion` once per request (it may schedule more); at
    /// `deadline` what is on the wire ends `.deadlineExceeded` and what waits `.notStarted`.
    func run(
        until deadline: ContinuousClock.Instant,
        completion: (_ tag: Int, _ result: Result<CurlResponse, CurlError>) -> Void)
}

extension CurlClient: DeliveryTransport {}

import Synchronization

/// What the public port allows a client: the limits a host facing the internet needs against slow, oversized or
/// too many connections. Each is answered clearly (a problem response, then the connection is closed) and logged.
package struct HTTPLimits: Sendable {
    package init() {}

    /// The request line and all header fields together, up to and including the blank line (431 past it).
    package var maxHeadBytes = 16 * 1024
    /// Header fields in one request (431 past it).
    package var maxHeaderCount = 100
    /// From a request's first byte until its header block is complete (408 past it).
    package var headerTimeout: Duration = .seconds(10)
    /// From the end of the header block until the body is complete (408 past it).
    package var bodyTimeout: Duration = .seconds(30)
    /// A connection with no request in progress is closed after this long (keep-alive idle, and a client that
    /// connects and sends nothing). Above the 60 s idle timeout of AWS's and Google's load balancers, as a backend's
    /// must be.
    package var idleTimeout: Duration = .seconds(75)
    /// Open connections at once; one more is answered 503 and closed.
    package var maxConnections = 512
    /// Open connections at once from one client address: its share of ``maxConnections``, so that one client
    /// cannot take all of them (one more is answered 503 and closed). Behind a proxy every connection comes from the
    /// proxy's address, so a deployment there sets it as high as ``maxConnections``.
    package var maxConnectionsPerClient = 128
    /// Requests of one client in flight at once (queued or running), across the functions: its share of their
    /// concurrency slots and queues (one more is answered 429 with `Retry-After: 1`). Behind proxies, the client is
    /// told from their header by ``clientAddress``.
    package var maxRequestsPerClient = 16
    /// How the client is read from the header the trusted proxies in front append to; `nil`: the connection's own
    /// address.
    package var clientAddress: ClientAddressRule?
    /// After an error answer, how long unread input is discarded before the socket closes, so that the client reads
    /// the answer instead of a reset.
    package var lingerTimeout: Duration = .seconds(2)
}

/// The open connections of one listener, in all and per client address.
final class ConnectionCount: Sendable {
    private let value = Atomic<Int>(0)
    private let byClient = Mutex<[String: Int]>([:])

    /// Counts a new connection; returns how many are open with it, in all and from its client's address.
    func opened(client: String) -> (total: Int, fromClient: Int) {
        let total = value.add(1, ordering: .relaxed).newValue
        let fromClient = byClient.withLock { counts in
            counts[client, default: 0] += 1
            return counts[client] ?? 1
        }
        return (total, fromClient)
    }

    func closed(client: String) {
        value.subtract(1, ordering: .relaxed)
        byClient.withLock { counts in
            let left = (counts[client] ?? 1) - 1
            counts[client] = left > 0 ? left : nil
        }
    }
}

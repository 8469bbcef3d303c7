import HTTPTypes
import Synchronization

/// Each client's share of the functions: how many of its requests may be in flight (queued for a function's
/// concurrency slot, or running) at once. Without it one client keeping enough requests open fills a function's
/// slots and queue (its `concurrency` and four times that) and every other caller of that function gets 503s.
///
/// The client is the connection's address, or, when it is a trusted proxy's, the address the proxies' header names
/// (``ClientAddressRule``).
final class ClientShare: Sendable {
    /// Requests of one client in flight at once; one more is answered 429 at once.
    let limit: Int
    /// How a request's client is told from its proxies; `nil`: the connection's address.
    let rule: ClientAddressRule?
    private let header: HTTPField.Name?
    private let inFlight = Mutex<[String: Int]>([:])

    init(limit: Int, rule: ClientAddressRule?) {
        self.limit = limit
        self.rule = rule
        self.header = rule.flatMap { HTTPField.Name($0.header) }
    }

    /// Who sent a request with these headers over a connection from `peer`.
    func client(headers: HTTPFields, peer: String?) -> String {
        guard let rule, let header else { return peer ?? "unknown" }
        return rule.client(headerLines: headers[values: header], peer: peer)
    }

    /// Counts a request of `client` in; `false` (nothing counted) when it already has ``limit`` in flight.
    func enter(_ client: String) -> Bool {
        inFlight.withLock { counts in
            let current = counts[client, default: 0]
            guard current < limit else { return false }
            counts[client] = current + 1
            return true
        }
    }

    /// Counts a request of `client` out.
    func leave(_ client: String) {
        inFlight.withLock { counts in
            let left = (counts[client] ?? 1) - 1
            counts[client] = left > 0 ? left : nil
        }
    }
}

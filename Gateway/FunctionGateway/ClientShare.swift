import HTTPTypes
import Synchronization

/// Each client's share of the functions: how many of its requests may be in flight (queued for a function's
/// concurrency slot, or running) at once. Without it one client keeping enough requests open fills a function's
/// slots and queue (its `concurrency` and four times that) and every other caller of that function gets 503s.
///
/// The client is the connection's address, or, when the gateway is told which header the proxy in front of it
/// sets (``clientHeader``), that header's last value: the one the proxy wrote, which the client cannot choose.
final class ClientShare: Sendable {
    /// Requests of one client in flight at once; one more is answered 429 at once.
    let limit: Int
    /// A header a trusted proxy sets to the client's address (`x-envoy-external-address`, `x-forwarded-for`).
    let clientHeader: HTTPField.Name?
    private let inFlight = Mutex<[String: Int]>([:])

    init(limit: Int, clientHeader: String?) {
        self.limit = limit
        self.clientHeader = clientHeader.flatMap { HTTPField.Name($0) }
    }

    /// Who sent a request with these headers over a connection from `peer`.
    func client(headers: HTTPFields, peer: String?) -> String {
        if let clientHeader, let value = headers[values: clientHeader].last {
            let last = value.split(separator: ",").last.map { String($0).trimmingOptionalSpaces() } ?? ""
            if !last.isEmpty { return last }
        }
        return peer ?? "unknown"
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

extension String {
    fileprivate func trimmingOptionalSpaces() -> String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}

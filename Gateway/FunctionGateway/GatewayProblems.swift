import FunctionRuntime

/// The problems only the gateway answers (the functions' own are FunctionRuntime's): rendered like any other
/// (``GatewayResponse/problem(_:requestID:)``, or raw on the connection by ``ConnectionGuard``).
extension Problem {
    /// No function is routed at the path.
    static func gatewayNotFound(_ path: String) -> Problem {
        .notFound("No function is routed at \(path).")
    }

    static func badGateway(_ detail: String) -> Problem {
        Problem(type: "/problems/bad-gateway", title: "Bad Gateway", status: 502, detail: detail)
    }

    static func gatewayTimeout(seconds: Int) -> Problem {
        Problem(
            type: "/problems/gateway-timeout", title: "Gateway Timeout", status: 504,
            detail: "The function did not answer within its \(seconds) s timeout.")
    }

    static func requestTimeout(_ detail: String = "The request body was not received completely.") -> Problem {
        Problem(type: "/problems/request-timeout", title: "Request Timeout", status: 408, detail: detail)
    }

    /// Too many open connections, at all or from one client: the connection is answered and closed.
    static func tooManyConnections(perClient: Bool) -> Problem {
        Problem(
            type: "/problems/unavailable", title: "Service Unavailable", status: 503,
            detail: perClient
                ? "This client has too many open connections. Retry later."
                : "The server has too many open connections. Retry later.",
            headers: ["retry-after": "1"])
    }

    static func headerFieldsTooLarge(_ detail: String) -> Problem {
        Problem(
            type: "/problems/request-header-fields-too-large", title: "Request Header Fields Too Large", status: 431,
            detail: detail)
    }

    static func noLiveWorker(retryAfterSeconds: Int) -> Problem {
        Problem(
            type: "/problems/unavailable", title: "Service Unavailable", status: 503,
            detail: "No worker of the function took the request in time. Retry later.",
            headers: ["retry-after": String(retryAfterSeconds)])
    }

    /// One client has its share of requests in flight (``ClientShare``).
    static func tooManyRequestsFromClient() -> Problem {
        Problem(
            type: "/problems/too-many-requests", title: "Too Many Requests", status: 429,
            detail: "This client has too many requests in progress. Retry when one has been answered.",
            headers: ["retry-after": "1"])
    }

    static func functionBusy() -> Problem {
        Problem(
            type: "/problems/unavailable", title: "Service Unavailable", status: 503,
            detail: "The function is at its concurrency limit. Retry later.", headers: ["retry-after": "1"])
    }
}

import Codecs
import FunctionRuntime
import ProcessSupervision
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// The HTTP side of `gateway serve`: maps each route of the function table to an invocation, the way API Gateway
/// in front of Lambda does — 404 for an unknown route, 405 with `Allow`, 413 past the body limit, 503 at the
/// concurrency cap, 504 at the timeout, 502 for a crash or unreadable output; `x-request-id` in and out; one
/// access-log line per request. Only functions with a route are reachable here: a scheduled function (run by the
/// ``Scheduler`` through ``invoke(_:event:requestID:finished:)``) is a 404 like any unknown path.
package final class Gateway: Sendable {
    package enum Mode: String, Sendable {
        case cold, warm
    }

    let table: FunctionTable
    let mode: Mode
    /// `--max-body`: lowers (never raises) every function's own body limit (``FunctionTable/Function/bodyLimit``).
    let maxBodyBytes: Int?
    let queueTimeout: Duration
    /// Adds `x-gateway-pid` (which process answered) to function responses; off unless asked for (`--debug-headers`).
    let debugHeaders: Bool
    let logger: Logger
    private let cold: ColdInvoker
    private let gates: [String: ConcurrencyGate]
    private let pools: [String: WarmPool]
    private let activeRequests = Atomic<Int>(0)
    private let draining = Atomic<Bool>(false)
    /// Each client's share of the functions' slots (``ClientShare``).
    private let clients: ClientShare

    init(
        table: FunctionTable, mode: Mode, cold: ColdInvoker, pools: [String: WarmPool], maxBodyBytes: Int?,
        queueTimeout: Duration, debugHeaders: Bool, limits: HTTPLimits = HTTPLimits(), logger: Logger
    ) {
        self.table = table
        clients = ClientShare(limit: limits.maxRequestsPerClient, rule: limits.clientAddress)
        self.debugHeaders = debugHeaders
        self.mode = mode
        self.cold = cold
        self.pools = pools
        self.maxBodyBytes = maxBodyBytes
        self.queueTimeout = queueTimeout
        self.logger = logger
        var gates: [String: ConcurrencyGate] = [:]
        for function in table.functions {
            gates[function.name] = ConcurrencyGate(limit: function.concurrency, queueLimit: function.concurrency * 4)
        }
        self.gates = gates
    }

    /// The largest body `function` is handed: its table limit, lowered by `--max-body` when that is smaller.
    func bodyLimit(of function: FunctionTable.Function) -> Int {
        min(function.bodyLimit, maxBodyBytes ?? .max)
    }

    /// The function routed at `path`, and the methods routed there. A function without a route is never found.
    func route(path: String, method: String) -> (function: FunctionTable.Function?, allowed: [String]) {
        let atPath = table.functions.filter { $0.routeKey != nil && $0.path == path }
        return (atPath.first { $0.method == method }, atPath.compactMap(\.method))
    }

    /// Serves one request for a function route (the middleware has matched the path).
    func handle(_ request: Request, context: GatewayContext) async -> Response {
        let started = ContinuousClock.now
        let requestID = Self.requestID(request.headers[HTTPField.Name("x-request-id")!])
        let method = request.method.rawValue
        let path = request.uri.path
        activeRequests.add(1, ordering: .relaxed)
        defer { activeRequests.subtract(1, ordering: .relaxed) }
        let (response, function) = await respond(request, context: context, requestID: requestID)
        let milliseconds =
            Double((ContinuousClock.now - started).components.attoseconds) / 1e15
            + Double((ContinuousClock.now - started).components.seconds) * 1000
        logger.info(
            "request",
            metadata: [
                "requestId": .string(requestID), "http.method": .string(method), "http.path": .string(path),
                "http.status": .stringConvertible(Int(response.status.code)), "function": .string(function ?? "-"),
                "duration_ms": .stringConvertible((milliseconds * 10).rounded() / 10), "mode": .string(mode.rawValue),
            ])
        return response
    }

    private func respond(
        _ request: Request, context: GatewayContext, requestID: String
    ) async -> (Response, String?) {
        let path = request.uri.path
        let (function, allowed) = route(path: path, method: request.method.rawValue)
        guard !allowed.isEmpty else {
            return (GatewayResponse.problem(.gatewayNotFound(path), requestID: requestID), nil)
        }
        guard let function else {
            return (
                GatewayResponse.problem(
                    .methodNotAllowed(allow: allowed.joined(separator: ", ")), requestID: requestID), nil
            )
        }
        guard !draining.load(ordering: .relaxed) else {
            return (
                GatewayResponse.problem(.serviceUnavailable(retryAfterSeconds: 1), requestID: requestID), function.name
            )
        }
        // One client's requests in flight are bounded before any is read or queued: past its share, a 429 at once.
        let client = clients.client(headers: request.headers, peer: context.remoteAddress?.ipAddress)
        guard clients.enter(client) else {
            logger.info(
                "request refused",
                metadata: [
                    "requestId": .string(requestID), "http.limit": "max_requests_per_client",
                    "function": .string(function.name),
                ])
            return (GatewayResponse.problem(.tooManyRequestsFromClient(), requestID: requestID), function.name)
        }
        defer { clients.leave(client) }
        // Memory per request is bounded before anything else: a body over the function's own limit is refused
        // from its Content-Length before a byte of it is read, and a chunked one is read only up to the limit.
        let limit = bodyLimit(of: function)
        if let declared = request.headers[.contentLength].flatMap(Int.init), declared > limit {
            return (GatewayResponse.refusedBody(limit: limit, requestID: requestID), function.name)
        }
        var request = request
        let body: [UInt8]
        do {
            body = Array(buffer: try await request.collectBody(upTo: limit))
        } catch is NIOTooManyBytesError {
            return (GatewayResponse.refusedBody(limit: limit, requestID: requestID), function.name)
        } catch {
            // The connection ended (or the guard cut a slow client off with a 408) before the body was complete.
            return (GatewayResponse.problem(.requestTimeout(), requestID: requestID), function.name)
        }
        let event = EventBuilder.event(
            method: request.method.rawValue, path: path, query: request.uri.query ?? "", headers: request.headers,
            body: body, sourceIP: context.remoteAddress?.ipAddress ?? "127.0.0.1",
            routeKey: function.routeKey ?? "", requestID: requestID, now: Date())
        // The function reads at most Lambda's synchronous payload; a worker is never handed more than it takes.
        guard event.count <= FunctionHost.eventLimit else {
            return (GatewayResponse.refusedBody(limit: limit, requestID: requestID), function.name)
        }
        guard let result = await invoke(function, event: event, requestID: requestID) else {
            return (GatewayResponse.problem(.functionBusy(), requestID: requestID), function.name)
        }
        switch result {
        case .output(let output, let pid):
            guard var response = GatewayResponse.fromFunctionOutput(output, requestID: requestID) else {
                return (
                    GatewayResponse.problem(
                        .badGateway("The function's output is not a response."), requestID: requestID), function.name
                )
            }
            // Which process answered: tells a developer (and the tests) whether warm workers are reused. A process id
            // is an internal, so only on request.
            if debugHeaders { response.headers[HTTPField.Name("x-gateway-pid")!] = String(pid) }
            return (response, function.name)
        case .timedOut:
            return (
                GatewayResponse.problem(.gatewayTimeout(seconds: function.timeoutSeconds), requestID: requestID),
                function.name
            )
        case .unavailable(let retryAfter):
            return (
                GatewayResponse.problem(.noLiveWorker(retryAfterSeconds: retryAfter), requestID: requestID),
                function.name
            )
        case .failed(let reason):
            logger.warning(
                "invocation failed",
                metadata: [
                    "requestId": .string(requestID), "function": .string(function.name), "reason": .string(reason),
                ])
            return (
                GatewayResponse.problem(.badGateway("The function failed without a response."), requestID: requestID),
                function.name
            )
        }
    }

    /// One invocation of `function` through its concurrency gate, cold or warm: what a request and a scheduled run
    /// both go through, so that both meet the same cap, timeout and kill rules.
    /// - Parameters:
    ///   - requestID: tags the function's forwarded log lines (and, warm, its trace id).
    ///   - finished: called exactly once: when the invocation has ended (post-response work included), or at once
    ///     when the gate turned it away.
    /// - Returns: `nil` when the function stayed at its concurrency cap for the whole queue timeout.
    func invoke(
        _ function: FunctionTable.Function, event: [UInt8], requestID: String,
        finished: @escaping @Sendable () async -> Void = {}
    ) async -> FunctionOutcome? {
        // One queue deadline for the whole wait: for a concurrency slot, then (warm) for a worker.
        let queueDeadline = ContinuousClock.now + queueTimeout
        guard let gate = gates[function.name], await gate.acquire(timeout: queueTimeout) else {
            await finished()
            return nil
        }
        let release: @Sendable () async -> Void = {
            await gate.release()
            await finished()
        }
        switch mode {
        case .cold:
            return await cold.invoke(function, event: event, requestID: requestID, finished: release)
        case .warm:
            guard let pool = pools[function.name] else {
                await release()
                return .failed("no warm pool for \(function.name)")
            }
            return await pool.invoke(
                event: event, clientRequestID: requestID, queueDeadline: queueDeadline, finished: release)
        }
    }

    /// The caller's `x-request-id` when it is a short token of letters, digits, `-`, `_`, `.` and `:`, else a new
    /// UUID. It becomes a warm worker's `Lambda-Runtime-Trace-Id` (`Root=1-<id>`): a `;` or `=` would let a caller
    /// append fields of its own there (`;Parent=…;Sampled=1`).
    static func requestID(_ given: String?) -> String {
        if let given, !given.isEmpty, given.utf8.count <= 128,
            given.utf8.allSatisfy({ byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || "-_.:".utf8.contains(byte)
            })
        {
            return given
        }
        return UUID.random().lowercasedText
    }

    /// Whether a drain has begun (`/readyz` answers 503 from then on).
    var isDraining: Bool { draining.load(ordering: .relaxed) }

    /// `/readyz`: the routed functions with no live warm worker (warm mode); empty when every one has one.
    func unreadyFunctions() async -> [String] {
        let routed = table.functions.filter { $0.routeKey != nil }.map(\.name)
        guard mode == .warm else { return [] }
        var unready: [String] = []
        for name in routed where await pools[name]?.isLive != true { unready.append(name) }
        return unready.sorted()
    }

    /// Stops accepting invocations (new requests get 503 until the listener closes).
    func beginDrain() { draining.store(true, ordering: .relaxed) }

    /// Whether a request is being answered or any function work (a post-response push included) is running.
    func isBusy(tracker: ProcessTracker) async -> Bool {
        if activeRequests.load(ordering: .relaxed) > 0 || tracker.count > 0 { return true }
        for pool in pools.values where await pool.isBusy { return true }
        return false
    }
}

/// Answers the health checks, then routes function paths to the gateway and everything else to the router (the FCM
/// emulator).
///
/// - `GET /healthz` (liveness): 200 `{"status":"ok"}` whenever the process answers.
/// - `GET /readyz` (readiness): 200 `{"status":"ready"}`; a 503 problem while a routed function has no live warm
///   worker (warm mode) or the gateway drains. The public port does not say which functions: the log does.
struct GatewayMiddleware: RouterMiddleware {
    typealias Context = GatewayContext
    let gateway: Gateway

    private func health(_ request: Request) async -> Response? {
        let path = request.uri.path
        guard path == "/healthz" || path == "/readyz" else { return nil }
        let requestID = Gateway.requestID(request.headers[HTTPField.Name("x-request-id")!])
        guard request.method == .get || request.method == .head else {
            return GatewayResponse.problem(.methodNotAllowed(allow: "GET, HEAD"), requestID: requestID)
        }
        let headers = ["content-type": "application/json", "cache-control": "no-store"]
        if path == "/healthz" {
            return GatewayResponse.make(
                status: 200, headers: headers, body: Array(#"{"status":"ok"}"#.utf8), requestID: requestID)
        }
        let unready = await gateway.unreadyFunctions()
        guard unready.isEmpty, !gateway.isDraining else {
            if !unready.isEmpty {
                gateway.logger.warning(
                    "not ready: no live worker", metadata: ["functions": .string(unready.joined(separator: ","))])
            }
            let problem = Problem(
                type: "/problems/unavailable", title: "Service Unavailable", status: 503,
                detail: gateway.isDraining
                    ? "Not ready: the gateway is shutting down." : "Not ready: a function has no live worker.",
                headers: ["retry-after": "1", "cache-control": "no-store"])
            return GatewayResponse.problem(problem, requestID: requestID)
        }
        return GatewayResponse.make(
            status: 200, headers: headers, body: Array(#"{"status":"ready"}"#.utf8), requestID: requestID)
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        if let health = await health(request) { return health }
        guard gateway.route(path: request.uri.path, method: request.method.rawValue).allowed.isEmpty else {
            return await gateway.handle(request, context: context)
        }
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            let requestID = Gateway.requestID(request.headers[HTTPField.Name("x-request-id")!])
            return GatewayResponse.problem(.gatewayNotFound(request.uri.path), requestID: requestID)
        }
    }
}

import FoundationEssentials
import FunctionRuntime
import OpenSSLCrypto
import Libpq
import Logging

/// Turns one event into one response for an ``Endpoint``: the single place where errors become problem responses.
///
/// Shared by the one-shot stdin/stdout mode, the Runtime-API loop and in-process tests, so all three behave alike.
public struct FunctionHandler<E: Endpoint> {
    /// Bodies larger than this are refused with 413 (docs/behaviour.md#contract-checks, docs/behaviour.md#limits).
    public static var bodyLimit: Int { 16 * 1024 }

    public let endpoint: E
    public let configuration: Configuration
    public let logger: Logger
    /// The handler lives as long as its process, so its authenticator's key sets serve every warm invocation.
    public let authenticator: Authenticator

    public init(endpoint: E, configuration: Configuration, logger: Logger) {
        self.endpoint = endpoint
        self.configuration = configuration
        self.logger = logger
        self.authenticator = Authenticator(configuration: configuration)
    }
}

extension FunctionHandler: InvocationHandling {
    public var functionName: String { endpoint.functionName }

    public var metricsNamespace: String { configuration.metricsNamespace }

    /// Handles one invocation: the only entry, for the one-shot host, the Runtime-API loop and in-process tests.
    ///
    /// The endpoint answers through its own `respond`, which builds the response and hands it to the host's, then goes
    /// on to its post-response work. An error thrown before the endpoint responds becomes the problem response (the
    /// one place that does so); one thrown after is logged; an endpoint that returns without responding is answered
    /// 500.
    /// - Parameters:
    ///   - input: the raw event JSON, the host's request id (used when the event carries none), the invocation's
    ///     clock reading, the host's deadline for the whole invocation (post-response work included) and the
    ///     invocation's metrics, which the push adds to.
    ///   - resources: the process's database session and FCM resources (kept across invocations in the
    ///     Runtime-API loop).
    ///   - respond: the host's way to deliver the response (stdout, the Runtime API, or memory in tests).
    public func handle(
        _ input: InvocationInput, resources: FunctionResources, respond: (APIGatewayV2Response) throws -> Void
    ) {
        let database = resources.database
        let event: APIGatewayV2Request
        do {
            event = try APIGatewayV2Request(parsing: input.eventBytes)
        } catch {
            let requestID = input.requestIDFallback ?? UUID().uuidString.lowercased()
            logger.warning(
                "invocation event is not an API Gateway 2.0 event", metadata: ["requestId": .string(requestID)])
            try? respond(.problem(.badRequest(error.detail), requestID: requestID))
            return
        }
        let requestID = FunctionRequest.requestID(of: event, fallback: input.requestIDFallback)
        var log = logger
        log[metadataKey: "requestId"] = .string(requestID)
        let context = InvocationContext(
            configuration: configuration, logger: log, database: database, push: resources.push,
            authenticator: authenticator, requestID: requestID, now: input.now, deadline: input.deadline,
            metrics: input.metrics)
        var responded = false
        do {
            try requireEdge(event, logger: log)
            let request = try FunctionRequest(
                event: event, method: endpoint.method, requestID: requestID, bodyLimit: Self.bodyLimit)
            try configuration.requireFunctionBasics()
            try endpoint.handle(request, context: context) { body in
                guard !responded else {
                    log.error("a second response was dropped")
                    return
                }
                let response = try APIGatewayV2Response.json(status: 200, body: body, requestID: requestID)
                responded = true
                log.info("request handled", metadata: ["http.status": .stringConvertible(200)])
                try respond(response)
            }
            guard responded else {
                log.error("the endpoint returned without a response")
                log.info("request handled", metadata: ["http.status": .stringConvertible(500)])
                try? respond(.problem(.internalError(), requestID: requestID))
                return
            }
        } catch {
            guard !responded else {
                // The caller has its answer: what failed after it (a response the host could not deliver) is logged,
                // and the connection, which may be in any state, is closed.
                database.close()
                log.error(
                    "request failed after its response", metadata: ["error.type": .string("\(type(of: error))")])
                return
            }
            let problem = Problem(error, logger: log)
            if problem.status >= 500 { database.close() }
            log.info("request handled", metadata: ["http.status": .stringConvertible(problem.status)])
            try? respond(.problem(problem, requestID: requestID))
        }
    }

    /// With ``Configuration/edgeOriginSecret`` set, a request must carry it as `x-origin-verify` (compared in
    /// constant time): what the edge adds to everything it forwards. Without it the request reached the HTTP API's
    /// own URL around the edge and its per-client limits: 403, before any body is read or any token verified.
    private func requireEdge(_ event: APIGatewayV2Request, logger: Logger) throws {
        guard let expected = configuration.edgeOriginSecret else { return }
        let presented = event.headerValue("x-origin-verify") ?? ""
        guard constantTimeEquals(Array(presented.utf8), Array(expected.utf8)) else {
            logger.info("request rejected", metadata: ["auth.reason": "notThroughEdge"])
            throw Problem.forbidden("Requests are served through the service's published address only.")
        }
    }

    public func oversizedEvent(limit: Int) -> APIGatewayV2Response {
        logger.warning("invocation event exceeds the size limit", metadata: ["limit": "\(limit)"])
        return .problem(.payloadTooLarge(limit: Self.bodyLimit), requestID: UUID().uuidString.lowercased())
    }

    public func release(_ resources: FunctionResources) {
        resources.release()
    }
}

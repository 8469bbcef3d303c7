import FoundationEssentials
import FunctionRuntime
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
    /// - Parameters:
    ///   - input: the raw event JSON, the host's request id (used when the event carries none), the invocation's
    ///     clock reading, the host's deadline for the whole invocation (post-response work included) and the
    ///     invocation's metrics, which the push adds to.
    ///   - resources: the process's database session and FCM resources (kept across invocations in the
    ///     Runtime-API loop).
    /// - Returns: the response, and the endpoint's post-response work bound to this invocation's context.
    public func handle(_ input: InvocationInput, resources: FunctionResources) -> InvocationOutput<APIGatewayV2Response>
    {
        let database = resources.database
        let event: APIGatewayV2Request
        do {
            event = try APIGatewayV2Request(parsing: input.eventBytes)
        } catch {
            let requestID = input.requestIDFallback ?? UUID().uuidString.lowercased()
            logger.warning(
                "invocation event is not an API Gateway 2.0 event", metadata: ["requestId": .string(requestID)])
            let problem = Problem.badRequest(error.detail)
            return InvocationOutput(document: .problem(problem, requestID: requestID))
        }
        let requestID = FunctionRequest.requestID(of: event, fallback: input.requestIDFallback)
        var log = logger
        log[metadataKey: "requestId"] = .string(requestID)
        let context = InvocationContext(
            configuration: configuration, logger: log, database: database, push: resources.push,
            authenticator: authenticator, requestID: requestID, now: input.now, deadline: input.deadline,
            metrics: input.metrics)
        do {
            let request = try FunctionRequest(
                event: event, method: endpoint.method, requestID: requestID, bodyLimit: Self.bodyLimit)
            try configuration.requireFunctionBasics()
            let answer = try endpoint.handle(request, context: context)
            let response = try APIGatewayV2Response.json(status: answer.status, body: answer.body, requestID: requestID)
            log.info("request handled", metadata: ["http.status": .stringConvertible(answer.status)])
            return InvocationOutput(document: response, afterResponse: answer.afterResponse)
        } catch {
            let problem = Problem(error, logger: log)
            if problem.status >= 500 { database.close() }
            log.info("request handled", metadata: ["http.status": .stringConvertible(problem.status)])
            return InvocationOutput(document: .problem(problem, requestID: requestID))
        }
    }

    public func oversizedEvent(limit: Int) -> InvocationOutput<APIGatewayV2Response> {
        logger.warning("invocation event exceeds the size limit", metadata: ["limit": "\(limit)"])
        let problem = Problem.payloadTooLarge(limit: Self.bodyLimit)
        return InvocationOutput(
            document: APIGatewayV2Response.problem(problem, requestID: UUID().uuidString.lowercased()))
    }

    public func release(_ resources: FunctionResources) {
        resources.release()
    }
}

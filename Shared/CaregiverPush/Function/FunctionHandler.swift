import FoundationEssentials
import FunctionRuntime
import Libpq
import Logging

/// Turns one event into one response for an ``Endpoint``: the single place where errors become problem responses.
///
/// Shared by the one-shot stdin/stdout mode, the Runtime-API loop and in-process tests, so all three behave alike.
public struct FunctionHandler<E: Endpoint> {
    /// Bodies larger than this are refused with 413 (SPEC §5).
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

    /// The outcome of one invocation: the response to write, then the work to run once it is written.
    public struct Outcome {
        public var response: APIGatewayV2Response
        public var afterResponse: (() -> Void)?
    }

    /// Handles one invocation.
    /// - Parameters:
    ///   - eventBytes: the raw event JSON.
    ///   - database: the process's database session (kept across invocations in the Runtime-API loop).
    ///   - push: the process's FCM resources (likewise kept).
    ///   - requestIDFallback: the host's request id (the Runtime API's), used when the event carries none.
    ///   - now: the invocation's clock reading.
    ///   - deadline: the host's deadline for the whole invocation (the Runtime API's), post-response work included.
    ///   - metrics: the invocation's metrics, which the push adds to.
    public func invoke(
        eventBytes: [UInt8], database: DatabaseSession, push: PushResources, requestIDFallback: String? = nil,
        now: Date = Date(), deadline: ContinuousClock.Instant? = nil, metrics: InvocationMetrics = InvocationMetrics()
    ) -> Outcome {
        let event: APIGatewayV2Request
        do {
            event = try APIGatewayV2Request(parsing: eventBytes)
        } catch {
            let requestID = requestIDFallback ?? UUID().uuidString.lowercased()
            logger.warning(
                "invocation event is not an API Gateway 2.0 event", metadata: ["requestId": .string(requestID)])
            let problem = Problem.badRequest(error.detail)
            return Outcome(response: .problem(problem, requestID: requestID), afterResponse: nil)
        }
        let requestID = FunctionRequest.requestID(of: event, fallback: requestIDFallback)
        var log = logger
        log[metadataKey: "requestId"] = .string(requestID)
        let context = InvocationContext(
            configuration: configuration, logger: log, database: database, push: push, authenticator: authenticator,
            requestID: requestID, now: now, deadline: deadline, metrics: metrics)
        do {
            let request = try FunctionRequest(
                event: event, method: endpoint.method, requestID: requestID, bodyLimit: Self.bodyLimit)
            try configuration.requireFunctionBasics()
            let answer = try endpoint.handle(request, context: context)
            let response = try APIGatewayV2Response.json(status: answer.status, body: answer.body, requestID: requestID)
            log.info("request handled", metadata: ["http.status": .stringConvertible(answer.status)])
            let work = answer.afterResponse.map { work in { work(context) } }
            return Outcome(response: response, afterResponse: work)
        } catch {
            let problem = Problem(error, logger: log)
            if problem.status >= 500 { database.close() }
            log.info("request handled", metadata: ["http.status": .stringConvertible(problem.status)])
            return Outcome(response: .problem(problem, requestID: requestID), afterResponse: nil)
        }
    }
}

extension FunctionHandler: InvocationHandling {
    public var functionName: String { endpoint.functionName }

    public var metricsNamespace: String { configuration.metricsNamespace }

    public func handle(_ input: InvocationInput, resources: FunctionResources) -> InvocationOutput {
        let outcome = invoke(
            eventBytes: input.eventBytes, database: resources.database, push: resources.push,
            requestIDFallback: input.requestIDFallback,
            now: input.now, deadline: input.deadline, metrics: input.metrics)
        return InvocationOutput(document: outcome.response, afterResponse: outcome.afterResponse)
    }

    public func oversizedEvent(limit: Int) -> InvocationOutput {
        logger.warning("invocation event exceeds the size limit", metadata: ["limit": "\(limit)"])
        let problem = Problem.payloadTooLarge(limit: Self.bodyLimit)
        return InvocationOutput(
            document: APIGatewayV2Response.problem(problem, requestID: UUID().uuidString.lowercased()),
            afterResponse: nil)
    }

    public func release(_ resources: FunctionResources) {
        resources.release()
    }
}

import Foundation
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
            return Outcome(response: Self.response(for: problem, requestID: requestID), afterResponse: nil)
        }
        let requestID = Self.requestID(of: event, fallback: requestIDFallback)
        var log = logger
        log[metadataKey: "requestId"] = .string(requestID)
        let context = InvocationContext(
            configuration: configuration, logger: log, database: database, push: push, authenticator: authenticator,
            requestID: requestID, now: now, deadline: deadline, metrics: metrics)
        do {
            let request = try makeRequest(event, requestID: requestID)
            try configuration.requireFunctionBasics()
            let answer = try endpoint.handle(request, context: context)
            let response = try Self.response(status: answer.status, body: answer.body, requestID: requestID)
            log.info("request handled", metadata: ["http.status": .stringConvertible(answer.status)])
            let work = answer.afterResponse.map { work in { work(context) } }
            return Outcome(response: response, afterResponse: work)
        } catch {
            let problem = Self.problem(for: error, logger: log)
            if problem.status >= 500 { database.close() }
            log.info("request handled", metadata: ["http.status": .stringConvertible(problem.status)])
            return Outcome(response: Self.response(for: problem, requestID: requestID), afterResponse: nil)
        }
    }

    private func makeRequest(_ event: APIGatewayV2Request, requestID: String) throws -> FunctionRequest {
        let method = (event.requestContext?.http?.method ?? endpoint.method).uppercased()
        guard method == endpoint.method else { throw Problem.methodNotAllowed(allow: endpoint.method) }
        var body: [UInt8] = []
        if let text = event.body {
            if event.isBase64Encoded == true {
                // Reject before decoding what cannot fit: base64 grows by 4/3.
                guard text.utf8.count <= (Self.bodyLimit / 3 + 1) * 4 + 4 else {
                    throw Problem.payloadTooLarge(limit: Self.bodyLimit)
                }
                guard let decoded = Data(base64Encoded: text) else {
                    throw Problem.badRequest("The body is marked base64 but is not valid base64.")
                }
                body = Array(decoded)
            } else {
                body = Array(text.utf8)
            }
        }
        guard body.count <= Self.bodyLimit else { throw Problem.payloadTooLarge(limit: Self.bodyLimit) }
        return FunctionRequest(event: event, method: method, requestID: requestID, body: body)
    }

    private static func requestID(of event: APIGatewayV2Request, fallback: String?) -> String {
        let candidates = [event.requestContext?.requestId, event.headerValue("x-request-id"), fallback]
        for case let candidate? in candidates where isPrintableID(candidate) { return candidate }
        return UUID().uuidString.lowercased()
    }

    /// A request id is echoed into headers and logs: keep it short and printable.
    private static func isPrintableID(_ value: String) -> Bool {
        !value.isEmpty && value.utf8.count <= 128
            && value.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
    }

    /// The one place where a thrown error becomes a problem; causes are logged, never returned.
    static func problem(for error: any Error, logger: Logger) -> Problem {
        switch error {
        case let configurationError as ConfigurationError:
            logger.error(
                "function is misconfigured",
                metadata: [
                    "config.variable": .string(configurationError.variable),
                    "config.reason": .string(configurationError.reason),
                ])
            return configurationError.problem
        case let postgresError as PostgresError where postgresError.code == .invalidConnectionString:
            // An unparseable URL is a misconfiguration (500), not an outage (503 with Retry-After).
            logger.error(
                "function is misconfigured",
                metadata: [
                    "config.variable": "DATABASE_URL", "config.reason": "cannot be parsed as a connection string",
                ])
            return .internalError()
        case let postgresError as PostgresError where postgresError.code == .startupParameterRefused:
            logger.error(
                "function is misconfigured",
                metadata: [
                    "config.variable": "DATABASE_URL",
                    "config.reason": "sets a startup parameter the server or its pooler refuses (options=…?)",
                ])
            return .internalError()
        case let postgresError as PostgresError where postgresError.code == .invalidParameter:
            logger.warning("request refused", metadata: ["db.code": .string(postgresError.code.description)])
            return .badRequest("The request holds a NUL character, which cannot be stored.")
        case let postgresError as PostgresError:
            var metadata: Logger.Metadata = ["db.code": .string(postgresError.code.description)]
            if let sqlState = postgresError.sqlState { metadata["db.sqlstate"] = .string(sqlState.rawValue) }
            logger.error(
                postgresError.isUnavailable ? "database unavailable" : "database error", metadata: metadata)
            return postgresError.problem
        case let convertible as any ProblemConvertible:
            return convertible.problem
        default:
            logger.error("unexpected error", metadata: ["error.type": .string(String(describing: type(of: error)))])
            return .internalError()
        }
    }

    static func response(for problem: Problem, requestID: String) -> APIGatewayV2Response {
        var headers = problem.headers
        headers["content-type"] = "application/problem+json"
        headers["x-request-id"] = requestID
        headers["cache-control"] = "no-store"
        let body = (try? encoder.encode(problem)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        return APIGatewayV2Response(statusCode: problem.status, headers: headers, body: body)
    }

    static func response(status: Int, body: any Encodable, requestID: String) throws -> APIGatewayV2Response {
        let data = try encoder.encode(body)
        return APIGatewayV2Response(
            statusCode: status,
            headers: ["content-type": "application/json", "x-request-id": requestID, "cache-control": "no-store"],
            body: String(decoding: data, as: UTF8.self))
    }

    private static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}

extension FunctionHandler: InvocationHandling {
    public var functionName: String { endpoint.functionName }

    public func handle(_ input: InvocationInput, database: DatabaseSession, push: PushResources) -> InvocationResult {
        let outcome = invoke(
            eventBytes: input.eventBytes, database: database, push: push, requestIDFallback: input.requestIDFallback,
            now: input.now, deadline: input.deadline, metrics: input.metrics)
        return InvocationResult(document: outcome.response, afterResponse: outcome.afterResponse)
    }

    public func oversizedEvent(limit: Int) -> InvocationResult {
        logger.warning("invocation event exceeds the size limit", metadata: ["limit": "\(limit)"])
        let problem = Problem.payloadTooLarge(limit: Self.bodyLimit)
        return InvocationResult(
            document: Self.response(for: problem, requestID: UUID().uuidString.lowercased()), afterResponse: nil)
    }
}

import Codecs
import FoundationEssentials
import FunctionRuntime
import Libpq
import Logging
import OpenSSLCrypto

/// Turns one event into one response for an ``Endpoint``: the single place where errors become problem responses.
///
/// Shared by the one-shot stdin/stdout mode, the Runtime-API loop and in-process tests, so all three behave alike.
public final class EndpointHandler<E: Endpoint>: InvocationHandler {
    /// Bodies larger than this are refused with 413 (docs/behaviour.md#contract-checks, docs/behaviour.md#limits).
    public static var bodyLimit: Int { 16 * 1024 }

    public let endpoint: E
    /// The process's configuration and resources, kept across warm invocations.
    public let service: CaregiverService

    public init(_ endpoint: E, service: CaregiverService) {
        self.endpoint = endpoint
        self.service = service
    }

    public var functionName: String { endpoint.functionName }
    public var logger: Logger { service.logger }
    public var metricsNamespace: String { service.configuration.metricsNamespace }

    /// Handles one invocation: the only entry, for the one-shot host, the Runtime-API loop and in-process tests.
    ///
    /// The endpoint answers through its writer, then goes on to its post-response work. An error thrown before the
    /// endpoint answers becomes the problem response (the one place that does so); one thrown after is logged.
    /// - Parameters:
    ///   - input: the raw event JSON, the host's request id (used when the event carries none), the invocation's
    ///     clock reading, the host's deadline for the whole invocation (post-response work included) and the
    ///     invocation's metrics, which the push adds to.
    ///   - writer: the host's way to deliver the response (stdout, the Runtime API, or memory in tests).
    public func handle(_ input: InvocationInput, writer: ResponseWriter<APIGatewayV2Response>) {
        let event: APIGatewayV2Request
        do {
            event = try APIGatewayV2Request(parsing: input.eventBytes)
        } catch {
            let requestID = input.requestIDFallback ?? UUID.random().lowercasedText
            logger.warning(
                "invocation event is not an API Gateway 2.0 event", metadata: ["requestId": .string(requestID)])
            try? writer.write(.problem(.badRequest(error.detail), requestID: requestID))
            return
        }
        let requestID = FunctionRequest.requestID(of: event, fallback: input.requestIDFallback)
        var log = logger
        log[metadataKey: "requestId"] = .string(requestID)
        let context = InvocationContext(
            service: service, logger: log, requestID: requestID, now: input.now, deadline: input.deadline,
            metrics: input.metrics)
        let endpointWriter = EndpointWriter<E.Response>(host: writer, context: context)
        do {
            try requireEdge(event, logger: log)
            let request = try FunctionRequest(
                event: event, method: endpoint.method, requestID: requestID, bodyLimit: Self.bodyLimit)
            if let misconfiguration = service.misconfiguration { throw misconfiguration }
            _ = try endpoint.handle(request, context: context, writer: endpointWriter)
        } catch {
            guard !endpointWriter.hasResponded else {
                // The caller has its answer: what failed after it (a response the host could not deliver) is logged,
                // and the connection, which may be in any state, is closed.
                context.database.close()
                log.error(
                    "request failed after its response", metadata: ["error.type": .string("\(type(of: error))")])
                return
            }
            let problem = Problem(error, logger: log)
            if problem.status >= 500 { context.database.close() }
            log.info("request handled", metadata: ["http.status": .stringConvertible(problem.status)])
            try? writer.write(.problem(problem, requestID: requestID))
        }
    }

    /// With ``Configuration/edgeOriginSecret`` set, a request must carry it as `x-origin-verify` (compared in
    /// constant time): what the edge adds to everything it forwards. Without it the request reached the HTTP API's
    /// own URL around the edge and its per-client limits: 403, before any body is read or any token verified.
    private func requireEdge(_ event: APIGatewayV2Request, logger: Logger) throws {
        guard let expected = service.configuration.edgeOriginSecret else { return }
        let presented = event.headerValue("x-origin-verify") ?? ""
        guard constantTimeEquals(Array(presented.utf8), Array(expected.utf8)) else {
            logger.info("request rejected", metadata: ["auth.reason": "notThroughEdge"])
            throw Problem.forbidden("Requests are served through the service's published address only.")
        }
    }

    public func oversizedEvent(limit: Int) -> APIGatewayV2Response {
        logger.warning("invocation event exceeds the size limit", metadata: ["limit": "\(limit)"])
        return .problem(.payloadTooLarge(limit: Self.bodyLimit), requestID: UUID.random().lowercasedText)
    }

    public func willInvoke() { service.renewIfPastGrace() }
    public func didInvoke(deadline: ContinuousClock.Instant?) { service.renewIfDue(deadline: deadline) }
    public func finish() { service.close() }
}

/// Turns one scheduled event into one summary for a ``ScheduledJob``; a bad event or configuration is a problem
/// document and does nothing.
public final class ScheduledHandler<J: ScheduledJob>: InvocationHandler {
    public let job: J
    public let service: CaregiverService

    public init(_ job: J, service: CaregiverService) {
        self.job = job
        self.service = service
    }

    public var functionName: String { job.functionName }
    public var logger: Logger { service.logger }
    public var metricsNamespace: String { service.configuration.metricsNamespace }

    /// Runs the job, then answers once with its summary (a bad event or configuration: at once, with a problem).
    public func handle(_ input: InvocationInput, writer: ResponseWriter<AnyDocument>) {
        // A response the host could not deliver is the host's to log; nothing of the job's is left to do.
        try? writer.write(document(for: input))
    }

    private func document(for input: InvocationInput) -> AnyDocument {
        let eventID: String?
        do {
            eventID = try Self.scheduledEventID(input.eventBytes)
        } catch {
            logger.warning("invocation event is not a scheduled event")
            return AnyDocument(error)
        }
        var log = logger
        let requestID = [eventID, input.requestIDFallback].compactMap { $0 }.first { FunctionRequest.isPrintableID($0) }
        log[metadataKey: "requestId"] = .string(requestID ?? UUID.random().lowercasedText)
        let configuration = service.configuration
        guard configuration.databaseURL != nil else {
            // A database secret that could not be read (on Lambda) is the cause to name.
            let cause =
                configuration.errors.first { $0.variable == "DATABASE_SECRET_ARN" }
                ?? ConfigurationError(variable: "DATABASE_URL", reason: "is not set")
            log.error(
                "function is misconfigured",
                metadata: ["config.variable": .string(cause.variable), "config.reason": .string(cause.reason)])
            return AnyDocument(Problem.internalError())
        }
        let context = InvocationContext(
            service: service, logger: log, requestID: requestID ?? "", now: input.now, deadline: input.deadline,
            metrics: input.metrics)
        return AnyDocument(job.run(context: context))
    }

    public func oversizedEvent(limit: Int) -> AnyDocument {
        logger.warning("invocation event exceeds the size limit", metadata: ["limit": "\(limit)"])
        return AnyDocument(Problem.badRequest("The event is too large."))
    }

    public func willInvoke() { service.renewIfPastGrace() }
    public func didInvoke(deadline: ContinuousClock.Instant?) { service.renewIfDue(deadline: deadline) }
    public func finish() { service.close() }

    /// The event's `id` when it is an EventBridge "Scheduled Event"; `nil` for `{}`.
    /// - Throws: a 400 ``Problem`` for anything else (not JSON, not an object, another `detail-type`).
    static func scheduledEventID(_ bytes: [UInt8]) throws(Problem) -> String? {
        let members = try Problem.eventMembers(bytes, expected: "an EventBridge Scheduled Event, or {}")
        if members.isEmpty { return nil }
        guard members["detail-type"]?.stringValue == "Scheduled Event" else {
            throw .badRequest("The event is not an EventBridge Scheduled Event (detail-type).")
        }
        return members["id"]?.stringValue
    }
}

// Errors become problem responses here and nowhere else: `Problem(error, logger:)` has one caller, the handlers
// above. Lower layers (Libpq, Curl, the crypto) know nothing of problems; the conformances below say what each of
// their errors means to a caller of this service.

extension Problem {
    /// The one place where a thrown error becomes a problem; causes are logged, never returned.
    public init(_ error: any Error, logger: Logger) {
        self = Self.mapping(error, logger: logger)
    }

    private static func mapping(_ error: any Error, logger: Logger) -> Problem {
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
        case let postgresError as PostgresError where postgresError.code == .serverNotVerified:
            logger.error(
                "function is misconfigured",
                metadata: [
                    "config.variable": "DATABASE_URL",
                    "config.reason": """
                    the database server's certificate was not verified: sslrootcert (PGSSLROOTCERT) must be the \
                    provider's CA bundle, and the host the name its certificate carries (sslmode=verify-full)
                    """,
                ])
            return Problem(
                type: "/problems/internal", title: "Internal Server Error", status: 500,
                detail: "The database server's certificate could not be verified (DATABASE_URL sslmode, sslrootcert).")
        case let postgresError as PostgresError where postgresError.sqlState == .invalidTextRepresentation:
            // Every value but an id is validated before it is sent; an id is sent as text and read as the app's
            // column type (AppID). Text a `uuid` column cannot hold names no row, as any unknown id does.
            logger.info("request refused", metadata: ["db.code": "22P02"])
            return .notFound("No such patient or medication.")
        case let postgresError as PostgresError where postgresError.code == .invalidParameter:
            logger.warning("request refused", metadata: ["db.code": .string(postgresError.code.description)])
            return .badRequest("The request holds a NUL character, which cannot be stored.")
        case let postgresError as PostgresError:
            logger.error(
                postgresError.isUnavailable ? "database unavailable" : "database error",
                metadata: ErrorMetadata.database(postgresError))
            return postgresError.problem
        case let convertible as any ProblemConvertible:
            return convertible.problem
        default:
            logger.error("unexpected error", metadata: ErrorMetadata.of(error))
            return .internalError()
        }
    }
}

// Retroactive: neither the platform's libpq binding nor its problem type knows the other; this service decides what a
// database error means to its callers.
extension PostgresError: @retroactive ProblemConvertible {
    /// An unreachable database is a 503 the client may retry; every other database failure is a plain 500.
    public var problem: Problem {
        isUnavailable ? .serviceUnavailable() : .internalError()
    }
}

extension ConfigurationError: ProblemConvertible {
    /// A configuration error is the operator's problem, not the caller's: a bare 500.
    public var problem: Problem { .internalError() }
}

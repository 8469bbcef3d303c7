import FoundationEssentials
import FunctionRuntime
import Logging

/// The functions of this service, as the function list names them (`infra/functions.json`, Package.swift's
/// products; FunctionListTests holds the three equal): the executable, the function table and the log's `function`.
public enum FunctionName: String, Sendable, CaseIterable {
    case pushRegister = "push-register"
    case pushUnregister = "push-unregister"
    case doseRecord = "dose-record"
    case slotBulkRecord = "slot-bulk-record"
    case prnRecord = "prn-record"
    case pushSweep = "push-sweep"
    case dbMigrate = "db-migrate"
}

/// One HTTP endpoint, run as one function: a request in, one typed response (or a thrown problem) out, then whatever
/// the endpoint owes after it.
///
/// After swift-aws-lambda-runtime's handler: the endpoint declares its response type and answers through a typed
/// writer (``EndpointWriter``), and what it hands back (``Responded``) only the writer makes, so an endpoint that
/// does not answer does not compile. A recording answers with what it recorded (``Recorded``), and the writer sends
/// the push it owes after the answer. `handle` is synchronous on purpose: the work is a few blocking libpq
/// statements, and the function serves one request at a time.
public protocol Endpoint: Sendable {
    /// The 200 answer's body.
    associatedtype Response: Encodable & Sendable

    /// The function this endpoint is.
    static var function: FunctionName { get }
    /// The HTTP method the route accepts.
    var method: String { get }

    /// Handles one request: answers 200 through `writer` (the caller has it when the writer returns), then does what
    /// it owes after the answer. Throw a ``Problem`` (or a ``ProblemConvertible`` error) before answering for a
    /// non-2xx answer; an error thrown after answering is only logged.
    func handle(_ request: FunctionRequest, context: InvocationContext, writer: EndpointWriter<Response>) throws
        -> Responded
}

extension Endpoint {
    /// The function's name (`push-register`).
    public var functionName: String { Self.function.rawValue }
}

/// A function run on a schedule rather than by a route (`push-sweep`): an EventBridge "Scheduled Event" (or `{}`)
/// in, a summary document out.
public protocol ScheduledJob: Sendable {
    /// The summary: counts only, for it is the invocation's response and it is logged.
    associatedtype Summary: Encodable & Sendable

    static var function: FunctionName { get }

    /// Does one run's work and returns its summary.
    func run(context: InvocationContext) -> Summary
}

extension ScheduledJob {
    public var functionName: String { Self.function.rawValue }
}

/// What an invocation may use besides its request: the process's service (configuration, database, FCM resources,
/// token keys), this invocation's log, request id, clock and deadline, and its metrics.
///
/// Not `Sendable`: it holds the database connection, which belongs to the invocation's thread. In the Runtime-API
/// loop the same ``DatabaseSession`` is handed to each invocation, so the connection outlives them.
public final class InvocationContext {
    public let configuration: Configuration
    public let logger: Logger
    public let database: DatabaseSession
    /// The process's FCM credentials and access token, made on first use.
    public var push: PushResources { service.push }
    /// The process's caregiver-token keys, made on first use.
    public var authenticator: Authenticator { service.authenticator }
    private let service: CaregiverService
    public let requestID: String
    /// The invocation's "now", fixed at its start so that every check of one request agrees.
    public let now: Date
    /// The host's deadline for the whole invocation, post-response work included: the Lambda invocation's
    /// `Lambda-Runtime-Deadline-Ms`; `nil` in one-shot mode, where the host kills the process at its timeout.
    public let deadline: ContinuousClock.Instant?
    /// The invocation's metrics, written as one EMF line when it ends.
    public let metrics: InvocationMetrics

    public init(
        service: CaregiverService, logger: Logger, requestID: String, now: Date,
        deadline: ContinuousClock.Instant? = nil,
        metrics: InvocationMetrics = InvocationMetrics()
    ) {
        configuration = service.configuration
        self.logger = logger
        database = service.database
        self.service = service
        self.requestID = requestID
        self.now = now
        self.deadline = deadline
        self.metrics = metrics
    }
}

/// Proof that an endpoint answered: made only by ``EndpointWriter``.
public struct Responded: Sendable {
    fileprivate init() {}
}

/// An endpoint's typed writer: its 200 answer, as an API Gateway response, through the host's writer; then, for a
/// recording, the push it owes.
public final class EndpointWriter<Response: Encodable & Sendable> {
    private let host: ResponseWriter<APIGatewayV2Response>
    private let context: InvocationContext
    /// What the answer's log line says, when the endpoint said more than that it answered (``note(_:_:)``).
    private var outcome: (message: Logger.Message, metadata: Logger.Metadata) = ("request handled", [:])

    init(host: ResponseWriter<APIGatewayV2Response>, context: InvocationContext) {
        self.host = host
        self.context = context
    }

    /// Whether the endpoint has answered (delivered or not).
    var hasResponded: Bool { host.hasResponded }

    /// What the answer's one log line says instead of "request handled": what the endpoint did, and its details.
    /// A request writes one line, not one for what it did and another for its answer (each line is written, read by
    /// the host, forwarded and, on AWS, ingested and billed).
    public func note(_ message: Logger.Message, _ metadata: Logger.Metadata) {
        outcome = (message, metadata)
    }

    /// Answers 200 with `body`; the caller has it when this returns.
    /// - Throws: ``ResponseNotDelivered`` when the host could not deliver it (logged by the host).
    public func respond(_ body: Response) throws -> Responded {
        let response = try APIGatewayV2Response.json(status: 200, body: body, requestID: context.requestID)
        context.logger.info(
            outcome.message, metadata: outcome.metadata.merging(["http.status": .stringConvertible(200)]) { $1 })
        try host.write(response)
        return Responded()
    }

    /// Answers 200 with the response `makeResponse` makes of what was recorded (and whether it was recorded now, or
    /// before), then sends the push the recording owes (none when it was recorded before) with the invocation's own
    /// resources, stopping before its deadline: what is not sent by then stays for `push-sweep`. The caller never
    /// waits for FCM; an answer that was not delivered sends nothing (the push stays owed, for the sweep).
    func respond<Value>(
        _ recorded: Recorded<Value>, _ makeResponse: (Value, _ recordedNow: Bool) throws -> Response
    ) throws -> Responded {
        let (body, push) = try recorded.take(makeResponse)
        let responded = try respond(body)
        if let push, let eventKey = push.eventKey {
            let dispatcher = PushDispatcher(configuration: context.configuration, logger: context.logger)
            dispatcher.dispatch(
                eventKey: eventKey, lease: push.lease, database: context.database, push: context.push,
                deadline: dispatcher.sendDeadline(hostDeadline: context.deadline), metrics: context.metrics)
        }
        return responded
    }
}

import FunctionRuntime
import FoundationEssentials
import Logging

/// One HTTP endpoint, run as one function: a request in, a response (or a thrown problem) out.
///
/// After swift-aws-lambda-runtime's handler: each `Functions/*/main.swift` only names its endpoint and hands it to
/// ``FunctionHost``, which owns stdin/stdout, decoding, encoding and turning errors into problem responses.
/// `handle` is synchronous on purpose: the work is a few blocking libpq statements, and the function serves one
/// request at a time.
public protocol Endpoint: Sendable {
    /// The function's name (`push-register`): the executable, the function table and the log's `function`.
    var functionName: String { get }
    /// The HTTP method the route accepts.
    var method: String { get }

    /// Handles one request. Throw a ``Problem`` (or a ``ProblemConvertible`` error) for a non-2xx answer.
    func handle(_ request: FunctionRequest, context: InvocationContext) throws -> EndpointResponse
}

/// A successful answer, and the work to do once it has been written.
public struct EndpointResponse {
    public var status: Int
    public var body: any Encodable & Sendable
    /// Runs after the response has been written and stdout closed (the push, docs/behaviour.md#sending), with the
    /// invocation's own context bound by the endpoint. It must not throw; it is bounded by the caller.
    public var afterResponse: AfterResponse?

    public init(status: Int = 200, body: any Encodable & Sendable, afterResponse: AfterResponse? = nil) {
        self.status = status
        self.body = body
        self.afterResponse = afterResponse
    }
}

/// What an invocation may use besides its request: configuration, the log, the database, the clock.
///
/// Not `Sendable`: it holds the database connection, which belongs to the invocation's thread. In the Runtime-API
/// loop the same ``DatabaseSession`` is handed to each invocation, so the connection outlives them.
public final class InvocationContext {
    public let configuration: Configuration
    public let logger: Logger
    public let database: DatabaseSession
    /// The process's FCM credentials and access token, loaded on first use.
    public let push: PushResources
    /// The process's caregiver-token keys (`SUPABASE_JWKS` parsed once, the `SUPABASE_JWKS_URL` copy kept).
    public let authenticator: Authenticator
    public let requestID: String
    /// The invocation's "now", fixed at its start so that every check of one request agrees.
    public let now: Date
    /// The host's deadline for the whole invocation, post-response work included: the Lambda invocation's
    /// `Lambda-Runtime-Deadline-Ms`; `nil` in one-shot mode, where the host kills the process at its timeout.
    public let deadline: ContinuousClock.Instant?
    /// The invocation's metrics, written as one EMF line when it ends.
    public let metrics: InvocationMetrics

    public init(
        configuration: Configuration, logger: Logger, database: DatabaseSession, push: PushResources,
        authenticator: Authenticator? = nil, requestID: String, now: Date, deadline: ContinuousClock.Instant? = nil,
        metrics: InvocationMetrics = InvocationMetrics()
    ) {
        self.configuration = configuration
        self.logger = logger
        self.database = database
        self.push = push
        self.authenticator = authenticator ?? Authenticator(configuration: configuration)
        self.requestID = requestID
        self.now = now
        self.deadline = deadline
        self.metrics = metrics
    }
}

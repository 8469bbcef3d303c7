import FunctionRuntime
import FoundationEssentials
import Logging

/// One HTTP endpoint, run as one function: a request in, one response (or a thrown problem) out, then whatever the
/// endpoint owes after it.
///
/// After swift-aws-lambda-runtime's handler: each `Functions/*/main.swift` only names its endpoint and hands it to
/// ``FunctionHost``, which owns stdin/stdout, decoding, encoding and turning errors into problem responses.
/// As its background-processing handler writes its response and carries on, an endpoint that records a dose reads
/// in its own file: record, `respond`, then dispatch the push it owes (``OwedPush``).
/// `handle` is synchronous on purpose: the work is a few blocking libpq statements, and the function serves one
/// request at a time.
public protocol Endpoint: Sendable {
    /// The function's name (`push-register`): the executable, the function table and the log's `function`.
    var functionName: String { get }
    /// The HTTP method the route accepts.
    var method: String { get }

    /// Handles one request: answers 200 with a body through `respond` (once; the caller has it when `respond`
    /// returns), then does what it owes after the answer.
    ///
    /// Throw a ``Problem`` (or a ``ProblemConvertible`` error) before responding for a non-2xx answer; an error thrown
    /// after responding is only logged, and returning without responding is a 500 (``FunctionHandler``).
    func handle(
        _ request: FunctionRequest, context: InvocationContext, respond: (any Encodable & Sendable) throws -> Void
    ) throws
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

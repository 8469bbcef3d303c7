import Codecs
import FoundationEssentials
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// The host, in one file: what an invocation is, how a handler answers it, and the two ways a process is run —
// one-shot on stdin/stdout, or the AWS Lambda Runtime API loop (docs/behaviour.md#contract-one-shot,
// docs/behaviour.md#contract-runtime-api).

/// One invocation as the host hands it over: the event bytes and what the host knows about them.
public struct InvocationInput {
    public var eventBytes: [UInt8]
    /// The host's request id (the Runtime API's), used when the event carries none.
    public var requestIDFallback: String?
    public var now: Date
    /// The host's deadline for the whole invocation, post-response work included.
    public var deadline: ContinuousClock.Instant?
    public var metrics: InvocationMetrics

    public init(
        eventBytes: [UInt8], requestIDFallback: String? = nil, now: Date = Date(),
        deadline: ContinuousClock.Instant? = nil, metrics: InvocationMetrics = InvocationMetrics()
    ) {
        self.eventBytes = eventBytes
        self.requestIDFallback = requestIDFallback
        self.now = now
        self.deadline = deadline
        self.metrics = metrics
    }
}

/// Thrown by ``ResponseWriter/write(_:)`` when the response was not delivered (it could not be encoded, stdout could
/// not be written, the Runtime API refused it): the host has logged why, and what the handler would have done after
/// its response is not done.
public struct ResponseNotDelivered: Error {}

/// What ``FunctionHost`` runs: the application's handler. It owns whatever it keeps for the process's life (a
/// database session, a token cache); the host never looks inside.
public protocol InvocationHandler: AnyObject {
    /// The response document's type.
    associatedtype Response: Encodable & Sendable

    var functionName: String { get }
    var logger: Logger { get }
    /// The CloudWatch EMF namespace of the invocation's metrics line.
    var metricsNamespace: String { get }

    /// Handles one invocation: answers it once through `writer`, then does what it owes after the answer (the push
    /// after a recording). Never throws: every failure is a response document. A handler that returns without
    /// writing leaves the host without an answer (one-shot: exit status 1; the loop: the Runtime API's `/error`).
    func handle(_ input: InvocationInput, writer: ResponseWriter<Response>)

    /// The answer to an event larger than the host accepts.
    func oversizedEvent(limit: Int) -> Response

    /// In the Runtime-API loop, before each invocation: a cheap check that what the handler holds may serve it.
    func willInvoke()
    /// In the Runtime-API loop, after each invocation (its response delivered, its post-response work done), with
    /// its deadline: time to refresh what the handler holds, off the request path.
    func didInvoke(deadline: ContinuousClock.Instant?)
    /// One-shot mode's end, once the invocation is done: let go of what the process held.
    func finish()
}

extension InvocationHandler {
    public func willInvoke() {}
    public func didInvoke(deadline: ContinuousClock.Instant?) {}
    public func finish() {}
}

/// The one way a handler answers an invocation, typed by its response (after swift-aws-lambda-runtime's
/// `LambdaResponseWriter`): the caller has the answer when ``write(_:)`` returns. One-shot, it writes the document
/// as one line on stdout and closes it; in the Runtime-API loop it posts it to `/response`; in memory (tests, an
/// in-process host) it keeps it.
public final class ResponseWriter<Response: Encodable & Sendable> {
    fileprivate enum Destination {
        case standardOutput
        case runtimeAPI(client: RuntimeAPIConnection, invocationPath: String)
        case memory(onWrite: (Response) -> Void)
    }

    private let destination: Destination
    private let logger: Logger
    /// Whether a response was handed to ``write(_:)`` (delivered or not).
    public private(set) var hasResponded = false
    /// Whether the response reached its destination (``write(_:)`` returned without throwing).
    public private(set) var delivered = false
    /// The response as written, kept by an in-memory writer.
    public private(set) var response: Response?

    fileprivate init(_ destination: Destination, logger: Logger) {
        self.destination = destination
        self.logger = logger
    }

    /// A writer that keeps the response in memory (``response``), for an in-process host: `onWrite` is called with it
    /// as it is written, before the handler's post-response work.
    public static func inMemory(logger: Logger, onWrite: @escaping (Response) -> Void = { _ in }) -> ResponseWriter {
        ResponseWriter(.memory(onWrite: onWrite), logger: logger)
    }

    /// Delivers `response`. A second call is logged and dropped.
    /// - Throws: ``ResponseNotDelivered`` when it could not be delivered (the reason is logged).
    public func write(_ response: Response) throws(ResponseNotDelivered) {
        guard !hasResponded else {
            logger.error("a second response was dropped")
            return
        }
        hasResponded = true
        switch destination {
        case .memory(let onWrite):
            self.response = response
            onWrite(response)
        case .standardOutput:
            guard let bytes = JSONCoding.encode(response) else {
                logger.critical("response could not be encoded")
                throw ResponseNotDelivered()
            }
            guard StandardStreams.writeAll(bytes + [UInt8(ascii: "\n")], to: STDOUT_FILENO) else {
                logger.critical("response could not be written to stdout")
                throw ResponseNotDelivered()
            }
            StandardStreams.closeOutput()
        case .runtimeAPI(let client, let invocationPath):
            guard let body = JSONCoding.encode(response) else {
                FunctionHost.post(
                    "\(invocationPath)/error",
                    body: FunctionHost.errorBody(type: "Runtime.SerializationError", message: "response not encodable"),
                    client: client, logger: logger)
                throw ResponseNotDelivered()
            }
            guard FunctionHost.post("\(invocationPath)/response", body: body, client: client, logger: logger) else {
                throw ResponseNotDelivered()
            }
        }
        delivered = true
    }
}

/// Runs a handler as a process, the way a serverless host invokes it.
///
/// One-shot (default): read one event from stdin to EOF, hand it to the handler, whose writer writes the response,
/// flushes and closes stdout — after which the handler does its post-response work; then exit 0. A host reading
/// stdout to EOF thus has the response before any push is sent.
///
/// With `AWS_LAMBDA_RUNTIME_API` set: `GET …/invocation/next` → handle → `POST …/invocation/{id}/response` →
/// post-response work → metrics line → next. The post-response work is bounded by the invocation's
/// `Lambda-Runtime-Deadline-Ms` (the handler keeps a margin), so the process is back at `/next` before AWS's
/// deadline. One ``RuntimeAPIConnection``, so one keep-alive connection to the host for every `next` and every result.
public enum FunctionHost {
    /// The largest event read, on stdin or from the Runtime API: Lambda's own limit on a synchronous invocation's
    /// payload (6 MB). A larger one is answered with the handler's ``InvocationHandler/oversizedEvent(limit:)`` and,
    /// in the Runtime-API loop, the loop goes on to the next event.
    public static let eventLimit = 6 * 1024 * 1024

    /// The process's logger, named for the function: JSON lines on stderr (``JSONLogHandler``). A host that stops
    /// reading must not kill the process mid-response either: SIGPIPE is ignored, the failed write reported instead.
    public static func logger(function name: String, environment: [String: String]) -> Logger {
        signal(SIGPIPE, SIG_IGN)
        JSONLogHandler.bootstrap(environment: environment)
        var logger = Logger(label: name)
        logger[metadataKey: "function"] = .string(name)
        return logger
    }

    /// Runs `handler` for this process — one-shot, or the Runtime-API loop when `AWS_LAMBDA_RUNTIME_API` is set in
    /// `environment` — and exits.
    public static func run(_ handler: some InvocationHandler, environment: [String: String]) -> Never {
        if let api = environment["AWS_LAMBDA_RUNTIME_API"], !api.isEmpty {
            handler.logger.info("runtime API loop starting")
            exit(runLoop(handler, api: api))
        }
        exit(runOnce(handler))
    }

    /// One-shot mode. Returns the exit status: 0 once a response was written, 1 when none was or it could not be.
    static func runOnce<H: InvocationHandler>(_ handler: H) -> Int32 {
        let started = ContinuousClock.now
        let metrics = InvocationMetrics()
        metrics.set(.coldStart, 1)
        let writer = ResponseWriter<H.Response>(.standardOutput, logger: handler.logger)
        if let bytes = StandardStreams.readInput(limit: eventLimit) {
            handler.handle(InvocationInput(eventBytes: bytes, metrics: metrics), writer: writer)
        } else {
            try? writer.write(handler.oversizedEvent(limit: eventLimit))
        }
        guard writer.hasResponded else {
            handler.logger.critical("the handler returned without a response")
            return 1
        }
        // Not delivered (not encodable, stdout gone): the writer has logged why; the host sees the exit status.
        guard writer.delivered else { return 1 }
        handler.finish()
        emitMetrics(metrics, handler: handler, started: started)
        return 0
    }

    /// The Runtime-API loop; returns the exit status once the Runtime API has gone away.
    static func runLoop<H: InvocationHandler>(_ handler: H, api: String) -> Int32 {
        let base = "/2018-06-01/runtime"
        guard let client = RuntimeAPIConnection(address: api) else {
            handler.logger.error(
                "runtime API unreachable", metadata: ["error": "AWS_LAMBDA_RUNTIME_API is not host:port[/path]"])
            return 1
        }
        var failures = 0
        var coldStart = true
        while true {
            // The host answers when it has an event: wait as long as it takes. An event up to Lambda's own limit is
            // read; a larger one is read to its end and dropped (its request id is still needed to answer it).
            let next = client.perform(
                method: "GET", path: "\(base)/invocation/next", bodyLimit: eventLimit, discardsOversizedBody: true,
                timeoutMilliseconds: 86_400_000)
            guard case .success(let response) = next, response.status == 200,
                let requestID = response.headers["lambda-runtime-aws-request-id"], !requestID.isEmpty
            else {
                failures += 1
                var reason = "unexpected answer"
                if case .failure(let error) = next { reason = error.description }
                handler.logger.error("runtime API unreachable", metadata: ["error": .string(reason)])
                // The host has gone (the runner stopped, the sandbox is shutting down): leave quietly.
                if failures >= 3 { return 1 }
                ThreadSleep.sleep(for: .milliseconds(200 * failures))
                continue
            }
            failures = 0
            let started = ContinuousClock.now
            let deadline = response.headers["lambda-runtime-deadline-ms"].flatMap {
                Self.deadline(epochMilliseconds: $0)
            }
            let metrics = InvocationMetrics()
            metrics.set(.coldStart, coldStart ? 1 : 0)
            coldStart = false
            handler.willInvoke()
            let invocationPath = "\(base)/invocation/\(requestID.percentEncoded)"
            let writer = ResponseWriter<H.Response>(
                .runtimeAPI(client: client, invocationPath: invocationPath), logger: handler.logger)
            if response.bodyExceededLimit {
                try? writer.write(handler.oversizedEvent(limit: eventLimit))
            } else {
                handler.handle(
                    InvocationInput(
                        eventBytes: response.body, requestIDFallback: requestID, deadline: deadline, metrics: metrics),
                    writer: writer)
            }
            if !writer.hasResponded {
                handler.logger.critical("the handler returned without a response")
                post(
                    "\(invocationPath)/error", body: errorBody(type: "Runtime.NoResponse", message: "no response"),
                    client: client, logger: handler.logger)
            }
            emitMetrics(metrics, handler: handler, started: started)
            handler.didInvoke(deadline: deadline)
        }
    }

    /// The wall-clock deadline (Unix epoch milliseconds) as an instant of the monotonic clock.
    static func deadline(epochMilliseconds text: String, now: Date = Date()) -> ContinuousClock.Instant? {
        guard let milliseconds = Int64(text.trimmingOptionalWhitespace()), milliseconds > 0 else { return nil }
        let remaining = Double(milliseconds) / 1000 - now.timeIntervalSince1970
        return ContinuousClock.now + .milliseconds(Int64((remaining * 1000).rounded(.down)))
    }

    /// Posts a result to the Runtime API. Returns whether it was accepted (2xx); a refusal is logged.
    @discardableResult
    fileprivate static func post(_ path: String, body: [UInt8], client: RuntimeAPIConnection, logger: Logger) -> Bool {
        let answer = client.perform(
            method: "POST", path: path, body: body, contentType: "application/json", bodyLimit: 1024 * 1024,
            timeoutMilliseconds: 10_000)
        switch answer {
        case .success(let response) where (200..<300).contains(response.status):
            return true
        case .success(let response):
            logger.error("runtime API refused the result", metadata: ["http.status": "\(response.status)"])
            return false
        case .failure(let error):
            logger.error("runtime API refused the result", metadata: ["error": .string(error.description)])
            return false
        }
    }

    /// The Runtime API's error document.
    static func errorBody(type: String, message: String) -> [UInt8] {
        Array(#"{"errorMessage":"\#(message)","errorType":"\#(type)","stackTrace":[]}"#.utf8)
    }

    /// Writes the invocation's EMF line (with its duration, response to end of post-response work) on stderr.
    static func emitMetrics(
        _ metrics: InvocationMetrics, handler: some InvocationHandler, started: ContinuousClock.Instant
    ) {
        let elapsed = ContinuousClock.now - started
        let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        metrics.set(.durationMs, (milliseconds * 10).rounded() / 10)
        JSONLogHandler.writeToStandardError(
            metrics.line(namespace: handler.metricsNamespace, function: handler.functionName))
    }
}

/// A response document of whichever type, for a handler whose answers differ in type (a problem or a summary).
/// Encodes exactly as the value it holds.
public struct AnyDocument: Encodable, Sendable {
    public let value: any Encodable & Sendable

    public init(_ value: any Encodable & Sendable) {
        self.value = value
    }

    public func encode(to encoder: any Encoder) throws {
        try value.encode(to: encoder)
    }
}

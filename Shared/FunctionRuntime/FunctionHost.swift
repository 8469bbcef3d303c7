import Codecs
import FoundationEssentials
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Runs a handler as a process, the way a serverless host invokes it (docs/behaviour.md#contract-one-shot).
///
/// One-shot (default): read one event from stdin to EOF and hand it to the handler with a way to respond — write the
/// response, flush and close stdout — after which the handler does its post-response work; then exit 0. A host
/// reading stdout to EOF thus has the response before any push is sent.
/// With `AWS_LAMBDA_RUNTIME_API` set: loop on the Lambda Runtime API instead (``RuntimeAPILoop``).
public enum FunctionHost {
    /// The largest event read, on stdin or from the Runtime API: Lambda's own limit on a synchronous invocation's
    /// payload (6 MB). A larger one is answered with the handler's 413 (``InvocationHandling/oversizedEvent(limit:)``)
    /// and, in the Runtime-API loop, the loop goes on to the next event.
    public static let eventLimit = 6 * 1024 * 1024

    /// Runs the handler that `setUp` makes for this process and exits.
    /// - Parameters:
    ///   - name: the function's name: the logger's label and the log's `function`.
    ///   - environment: the process's environment when the caller has already read it: FoundationEssentials'
    ///     `ProcessInfo.environment` makes a new dictionary from `environ` at every call (a cold start's worth of
    ///     string scanning: docs/benchmarks.md, "Where the cold gap goes"); `nil` reads it here.
    ///   - renew: in the Runtime-API loop, asked after each invocation (its response posted, its post-response work
    ///     done; given its deadline) whether the handler and resources must be made again for the next one (secrets
    ///     read at run time have changed); `nil` keeps them. The old resources are released.
    ///   - prepare: in the Runtime-API loop, asked before each invocation whether the handler and resources in hand
    ///     may serve it (a secret past its grace: read again now, or dropped); `nil` keeps them.
    ///   - setUp: given the environment and the function's logger, the handler and the resources it keeps for the
    ///     process's life. Called once, before the first event is read.
    public static func main<H: InvocationHandling>(
        name: String, environment: [String: String]? = nil,
        renew: ((_ deadline: ContinuousClock.Instant?) -> (H, H.Resources)?)? = nil,
        prepare: (() -> (H, H.Resources)?)? = nil,
        _ setUp: (_ environment: [String: String], _ logger: Logger) -> (H, H.Resources)
    ) -> Never {
        // A host that stops reading must not kill us mid-response: the failed write is reported instead.
        signal(SIGPIPE, SIG_IGN)
        let environment = environment ?? ProcessInfo.processInfo.environment
        JSONLogHandler.bootstrap(environment: environment)
        var logger = Logger(label: name)
        logger[metadataKey: "function"] = .string(name)
        let (handler, resources) = setUp(environment, logger)
        if let api = environment["AWS_LAMBDA_RUNTIME_API"], !api.isEmpty {
            logger.info("runtime API loop starting")
            var loop = RuntimeAPILoop(
                handler: handler, resources: resources, api: api, renew: renew, prepare: prepare)
            exit(loop.run())
        }
        exit(runOnce(handler, resources: resources))
    }

    /// One-shot mode. Returns the exit status: 0 once a response was written, 1 when none could be.
    ///
    /// The handler answers through `respond`, which writes the document and closes stdout: a host reading stdout to
    /// EOF has its answer while the handler goes on to its post-response work.
    static func runOnce<H: InvocationHandling>(_ handler: H, resources: H.Resources) -> Int32 {
        let started = ContinuousClock.now
        let metrics = InvocationMetrics()
        metrics.set(.coldStart, 1)
        var written: Bool?
        let respond = { (document: H.Document) throws in
            guard written == nil else {
                handler.logger.error("a second response was dropped")
                return
            }
            written = writeResponse(document, logger: handler.logger)
            guard written == true else { throw ResponseNotDelivered() }
        }
        switch StandardStreams.readInput(limit: eventLimit) {
        case .some(let bytes):
            handler.handle(InvocationInput(eventBytes: bytes, metrics: metrics), resources: resources, respond: respond)
        case .none:
            try? respond(handler.oversizedEvent(limit: eventLimit))
        }
        guard let written else {
            handler.logger.critical("the handler returned without a response")
            return 1
        }
        guard written else { return 1 }
        handler.release(resources)
        emitMetrics(metrics, handler: handler, started: started)
        return 0
    }

    /// Writes `document` as one line on stdout and closes it. Returns whether it was written.
    private static func writeResponse(_ document: some Encodable, logger: Logger) -> Bool {
        guard let bytes = JSONCoding.encode(document) else {
            logger.critical("response could not be encoded")
            return false
        }
        guard StandardStreams.writeAll(bytes + [UInt8(ascii: "\n")], to: STDOUT_FILENO) else {
            logger.critical("response could not be written to stdout")
            return false
        }
        StandardStreams.closeOutput()
        return true
    }

    /// Writes the invocation's EMF line (with its duration, response to end of post-response work) on stderr.
    static func emitMetrics(
        _ metrics: InvocationMetrics, handler: some InvocationHandling, started: ContinuousClock.Instant
    ) {
        let elapsed = ContinuousClock.now - started
        let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        metrics.set(.durationMs, (milliseconds * 10).rounded() / 10)
        JSONLogHandler.writeToStandardError(
            metrics.line(namespace: handler.metricsNamespace, function: handler.functionName))
    }
}

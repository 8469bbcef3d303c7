import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// Runs an endpoint as a process, the way a serverless host invokes it (SPEC §2).
///
/// One-shot (default): read one event from stdin to EOF, write the response, flush and close stdout, then run the
/// post-response work, then exit 0. A host reading stdout to EOF thus has the response before any push is sent.
/// With `AWS_LAMBDA_RUNTIME_API` set: loop on the Lambda Runtime API instead (``RuntimeAPILoop``).
public enum FunctionHost {
    /// The largest event accepted on stdin. A 16 KiB body base64-encoded plus headers fits many times over.
    static let eventLimit = 1024 * 1024

    /// Runs `endpoint` for this process and exits.
    public static func main(_ endpoint: some Endpoint) -> Never {
        main(name: endpoint.functionName) { configuration, logger in
            FunctionHandler(endpoint: endpoint, configuration: configuration, logger: logger)
        }
    }

    /// Runs a scheduled `job` (`push-sweep`) for this process and exits.
    public static func main(_ job: some ScheduledJob) -> Never {
        main(name: job.functionName) { configuration, logger in
            ScheduledHandler(job: job, configuration: configuration, logger: logger)
        }
    }

    /// Runs any other ``InvocationHandling`` (`db-migrate`'s custom resource) for this process and exits.
    public static func main<H: InvocationHandling>(
        name: String, _ makeHandler: (Configuration, Logger) -> H
    ) -> Never {
        // A host that stops reading must not kill us mid-response: the failed write is reported instead.
        signal(SIGPIPE, SIG_IGN)
        let environment = ProcessInfo.processInfo.environment
        JSONLogHandler.bootstrap(environment: environment)
        var logger = Logger(label: name)
        logger[metadataKey: "function"] = .string(name)
        let configuration = Configuration(environment: environment)
        let handler = makeHandler(configuration, logger)
        let database = DatabaseSession(configuration: configuration)
        let push = PushResources(configuration: configuration)
        if let api = environment["AWS_LAMBDA_RUNTIME_API"], !api.isEmpty {
            logger.info("runtime API loop starting")
            exit(RuntimeAPILoop(handler: handler, database: database, push: push, api: api).run())
        }
        exit(runOnce(handler, database: database, push: push))
    }

    /// One-shot mode. Returns the exit status: 0 once a response was written, 1 when none could be.
    static func runOnce<H: InvocationHandling>(_ handler: H, database: DatabaseSession, push: PushResources) -> Int32 {
        let started = ContinuousClock.now
        let metrics = InvocationMetrics()
        metrics.set(.coldStart, 1)
        let result: InvocationResult
        switch readStandardInput(limit: eventLimit) {
        case .some(let bytes):
            result = handler.handle(
                InvocationInput(eventBytes: bytes, metrics: metrics), database: database, push: push)
        case .none:
            result = handler.oversizedEvent(limit: eventLimit)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(result.document) else {
            handler.logger.critical("response could not be encoded")
            return 1
        }
        do {
            try FileHandle.standardOutput.write(contentsOf: data + Data("\n".utf8))
        } catch {
            handler.logger.critical("response could not be written to stdout")
            return 1
        }
        closeStandardOutput()
        result.afterResponse?()
        database.close()
        emitMetrics(metrics, handler: handler, started: started)
        return 0
    }

    /// Writes the invocation's EMF line (with its duration, response to end of post-response work) on stderr.
    static func emitMetrics(
        _ metrics: InvocationMetrics, handler: some InvocationHandling, started: ContinuousClock.Instant
    ) {
        let elapsed = ContinuousClock.now - started
        let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        metrics.set(.durationMs, (milliseconds * 10).rounded() / 10)
        JSONLogHandler.writeToStandardError(
            metrics.line(namespace: handler.configuration.metricsNamespace, function: handler.functionName))
    }

    /// Reads stdin to EOF; `nil` when it holds more than `limit` bytes.
    static func readStandardInput(limit: Int) -> [UInt8]? {
        var bytes: [UInt8] = []
        while let chunk = try? FileHandle.standardInput.read(upToCount: 64 * 1024), !chunk.isEmpty {
            bytes.append(contentsOf: chunk)
            if bytes.count > limit { return nil }
        }
        return bytes
    }

    /// Gives the host its EOF now: fd 1 is pointed at /dev/null, which closes the pipe, and keeps fd 1 taken so
    /// that no later `open` can land on it and receive a stray write.
    static func closeStandardOutput() {
        let devNull = open("/dev/null", O_WRONLY)
        if devNull >= 0 {
            dup2(devNull, STDOUT_FILENO)
            close(devNull)
        } else {
            close(STDOUT_FILENO)
        }
    }
}

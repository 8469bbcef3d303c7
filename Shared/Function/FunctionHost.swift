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
        // A host that stops reading must not kill us mid-response: the failed write is reported instead.
        signal(SIGPIPE, SIG_IGN)
        let environment = ProcessInfo.processInfo.environment
        JSONLogHandler.bootstrap(environment: environment)
        var logger = Logger(label: endpoint.functionName)
        logger[metadataKey: "function"] = .string(endpoint.functionName)
        let configuration = Configuration(environment: environment)
        let handler = FunctionHandler(endpoint: endpoint, configuration: configuration, logger: logger)
        let database = DatabaseSession(configuration: configuration)
        let push = PushResources(configuration: configuration)
        if let api = environment["AWS_LAMBDA_RUNTIME_API"], !api.isEmpty {
            logger.info("runtime API loop starting")
            exit(RuntimeAPILoop(handler: handler, database: database, push: push, api: api).run())
        }
        exit(runOnce(handler, database: database, push: push))
    }

    /// One-shot mode. Returns the exit status: 0 once a response was written, 1 when none could be.
    static func runOnce<E: Endpoint>(
        _ handler: FunctionHandler<E>, database: DatabaseSession, push: PushResources
    ) -> Int32 {
        let outcome: FunctionHandler<E>.Outcome
        switch readStandardInput(limit: eventLimit) {
        case .some(let bytes):
            outcome = handler.invoke(eventBytes: bytes, database: database, push: push)
        case .none:
            handler.logger.warning("invocation event exceeds the size limit", metadata: ["limit": "\(eventLimit)"])
            let problem = Problem.payloadTooLarge(limit: FunctionHandler<E>.bodyLimit)
            outcome = .init(
                response: FunctionHandler<E>.response(for: problem, requestID: UUID().uuidString.lowercased()),
                afterResponse: nil)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(outcome.response) else {
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
        outcome.afterResponse?()
        database.close()
        return 0
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

import FoundationEssentials
import FunctionRuntime
import Logging

/// A function run on a schedule rather than by a route (`push-sweep`): an EventBridge "Scheduled Event" (or `{}`)
/// in, a summary document out.
public protocol ScheduledJob: Sendable {
    var functionName: String { get }

    /// Does one run's work and returns its summary (counts only: it is the invocation's response, and logged).
    func run(context: InvocationContext) -> any Encodable & Sendable
}

/// Turns one scheduled event into one summary for a ``ScheduledJob``; a bad event or configuration is a problem
/// document and does nothing.
public struct ScheduledHandler<J: ScheduledJob>: InvocationHandling {
    public let job: J
    public let configuration: Configuration
    public let logger: Logger

    public init(job: J, configuration: Configuration, logger: Logger) {
        self.job = job
        self.configuration = configuration
        self.logger = logger
    }

    public var functionName: String { job.functionName }

    public var metricsNamespace: String { configuration.metricsNamespace }

    /// Runs the job, then answers once with its summary (a bad event or configuration: at once, with a problem).
    public func handle(
        _ input: InvocationInput, resources: FunctionResources, respond: (AnyDocument) throws -> Void
    ) {
        // A response the host could not deliver is the host's to log; nothing of the job's is left to do.
        try? respond(document(for: input, resources: resources))
    }

    private func document(for input: InvocationInput, resources: FunctionResources) -> AnyDocument {
        let eventID: String?
        do {
            eventID = try Self.scheduledEventID(input.eventBytes)
        } catch {
            logger.warning("invocation event is not a scheduled event")
            return AnyDocument(error)
        }
        var log = logger
        let requestID = [eventID, input.requestIDFallback].compactMap { $0 }.first { FunctionRequest.isPrintableID($0) }
        log[metadataKey: "requestId"] = .string(requestID ?? UUID().uuidString.lowercased())
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
            configuration: configuration, logger: log, database: resources.database, push: resources.push,
            requestID: requestID ?? "", now: input.now, deadline: input.deadline, metrics: input.metrics)
        return AnyDocument(job.run(context: context))
    }

    public func oversizedEvent(limit: Int) -> AnyDocument {
        logger.warning("invocation event exceeds the size limit", metadata: ["limit": "\(limit)"])
        return AnyDocument(Problem.badRequest("The event is too large."))
    }

    public func release(_ resources: FunctionResources) {
        resources.release()
    }

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

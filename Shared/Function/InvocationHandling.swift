import Foundation
import Logging

/// One invocation as a host hands it over: the event bytes and what the host knows about them.
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

/// What an invocation produced: the response document, then the work to run once it has been delivered.
public struct InvocationResult {
    public var document: any Encodable & Sendable
    public var afterResponse: (() -> Void)?

    public init(document: any Encodable & Sendable, afterResponse: (() -> Void)?) {
        self.document = document
        self.afterResponse = afterResponse
    }
}

/// What ``FunctionHost`` runs, one-shot or in the Runtime-API loop: an HTTP ``Endpoint`` (through
/// ``FunctionHandler``) or a ``ScheduledJob`` (through ``ScheduledHandler``).
public protocol InvocationHandling {
    var functionName: String { get }
    var configuration: Configuration { get }
    var logger: Logger { get }

    /// Handles one invocation. Never throws: every failure is a response document.
    func handle(_ input: InvocationInput, database: DatabaseSession, push: PushResources) -> InvocationResult

    /// The answer to an event larger than the host accepts.
    func oversizedEvent(limit: Int) -> InvocationResult
}

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

    public func handle(_ input: InvocationInput, database: DatabaseSession, push: PushResources) -> InvocationResult {
        let eventID: String?
        do {
            eventID = try Self.scheduledEventID(input.eventBytes)
        } catch {
            logger.warning("invocation event is not a scheduled event")
            return InvocationResult(document: error, afterResponse: nil)
        }
        var log = logger
        let requestID = [eventID, input.requestIDFallback].compactMap { $0 }.first { Self.isPrintableID($0) }
        log[metadataKey: "requestId"] = .string(requestID ?? UUID().uuidString.lowercased())
        guard configuration.databaseURL != nil else {
            log.error(
                "function is misconfigured",
                metadata: ["config.variable": "DATABASE_URL", "config.reason": "is not set"])
            return InvocationResult(document: Problem.internalError(), afterResponse: nil)
        }
        let context = InvocationContext(
            configuration: configuration, logger: log, database: database, push: push,
            requestID: requestID ?? "", now: input.now, deadline: input.deadline, metrics: input.metrics)
        return InvocationResult(document: job.run(context: context), afterResponse: nil)
    }

    public func oversizedEvent(limit: Int) -> InvocationResult {
        logger.warning("invocation event exceeds the size limit", metadata: ["limit": "\(limit)"])
        return InvocationResult(document: Problem.badRequest("The event is too large."), afterResponse: nil)
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

    private static func isPrintableID(_ value: String) -> Bool {
        !value.isEmpty && value.utf8.count <= 128
            && value.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
    }
}

extension Problem {
    /// The members of an event that must be a JSON object (a scheduled event, a custom-resource request).
    /// - Parameter expected: what the event should have been, for the 400's detail.
    /// - Throws: a 400 ``Problem`` when the bytes are not JSON, or not an object.
    static func eventMembers(_ bytes: [UInt8], expected: String) throws(Problem) -> [String: JSONValue] {
        let document: JSONValue
        do {
            document = try JSONValue.parse(bytes)
        } catch {
            throw .badRequest("The event is not valid JSON.")
        }
        guard let members = document.objectValue else {
            throw .badRequest("The event must be a JSON object: \(expected).")
        }
        return members
    }
}

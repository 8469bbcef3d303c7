import Codecs
import FoundationEssentials
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
public struct InvocationOutput {
    public var document: any Encodable & Sendable
    public var afterResponse: (() -> Void)?

    public init(document: any Encodable & Sendable, afterResponse: (() -> Void)?) {
        self.document = document
        self.afterResponse = afterResponse
    }
}

/// What ``FunctionHost`` runs, one-shot or in the Runtime-API loop: the application's handler, generic over the
/// resources the application keeps for the life of a process (for this project, a database session and the FCM
/// client; the runtime never looks inside them).
public protocol InvocationHandling {
    /// What the application keeps for the process's life and hands to every invocation.
    associatedtype Resources

    var functionName: String { get }
    var logger: Logger { get }
    /// The CloudWatch EMF namespace of the invocation's metrics line.
    var metricsNamespace: String { get }

    /// Handles one invocation. Never throws: every failure is a response document.
    func handle(_ input: InvocationInput, resources: Resources) -> InvocationOutput

    /// The answer to an event larger than the host accepts.
    func oversizedEvent(limit: Int) -> InvocationOutput

    /// One-shot mode's end, once the post-response work is done: let go of what the process held.
    func release(_ resources: Resources)
}

extension Problem {
    /// The members of an event that must be a JSON object (a scheduled event, a custom-resource request).
    /// - Parameter expected: what the event should have been, for the 400's detail.
    /// - Throws: a 400 ``Problem`` when the bytes are not JSON, or not an object.
    public static func eventMembers(_ bytes: [UInt8], expected: String) throws(Problem) -> [String: JSONValue] {
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

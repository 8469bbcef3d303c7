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

/// Thrown by a host's `respond` when the response could not be delivered (it could not be encoded, or stdout could
/// not be written): the host has logged why, and what the handler would have done after its response is not done.
public struct ResponseNotDelivered: Error {}

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

/// What ``FunctionHost`` runs, one-shot or in the Runtime-API loop: the application's handler, generic over the
/// resources the application keeps for the life of a process (for this project, a database session and the FCM
/// client; the runtime never looks inside them).
public protocol InvocationHandling {
    /// What the application keeps for the process's life and hands to every invocation.
    associatedtype Resources
    /// The response document's type.
    associatedtype Document: Encodable & Sendable

    var functionName: String { get }
    var logger: Logger { get }
    /// The CloudWatch EMF namespace of the invocation's metrics line.
    var metricsNamespace: String { get }

    /// Handles one invocation: answers it once through `respond`, then does what it owes after the answer (the push
    /// after a recording). Never throws: every failure is a response document.
    ///
    /// `respond` is the host's: in one-shot mode it writes the document to stdout and closes it, in the Runtime-API
    /// loop it posts it to `/response`; either way the caller has its answer when `respond` returns. It throws
    /// ``ResponseNotDelivered`` when the answer could not be delivered. A second call is logged and dropped; a handler
    /// that returns without calling it leaves the host without an answer (one-shot: exit status 1; the loop: the
    /// Runtime API's `/error`).
    func handle(_ input: InvocationInput, resources: Resources, respond: (Document) throws -> Void)

    /// The answer to an event larger than the host accepts.
    func oversizedEvent(limit: Int) -> Document

    /// One-shot mode's end, once the invocation is done: let go of what the process held.
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

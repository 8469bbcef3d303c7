import Codecs
import FoundationEssentials

/// The metrics of one invocation, written at its end as one CloudWatch Embedded Metric Format (EMF) object on a log
/// line of stderr — the Lambda ecosystem's way (AWS Lambda Powertools emits the same shape): CloudWatch turns the
/// line into metrics without an API call from the function.
///
/// Only counts and a duration: never a token, a name or an identifier. Not `Sendable`: it belongs to the
/// invocation's thread.
public final class InvocationMetrics {
    /// Every metric a function emits.
    public enum Name: String, CaseIterable, Sendable {
        /// 1 for the first invocation of a process, 0 after.
        case coldStart = "ColdStart"
        /// From the event's arrival to the end of the post-response work.
        case durationMs = "DurationMs"
        case pushSent = "PushSent"
        case pushFailed = "PushFailed"
        case pushDisabled = "PushDisabled"
        /// Deliveries returned to PENDING for a later attempt (a transient failure, the deadline).
        case pushRetryScheduled = "PushRetryScheduled"
        case pushExpired = "PushExpired"
        case sweepLeased = "SweepLeased"
        case devicesPruned = "DevicesPruned"

        var unit: String { self == .durationMs ? "Milliseconds" : "Count" }
    }

    private var values: [Name: Double] = [:]

    public init() {}

    /// Adds `value` to a counter (creating it at 0): a counter that was touched is emitted even when it stayed 0.
    public func add(_ name: Name, _ value: Int) {
        values[name, default: 0] += Double(value)
    }

    public func set(_ name: Name, _ value: Double) {
        values[name] = value
    }

    public func value(_ name: Name) -> Double? { values[name] }

    /// The EMF object, one line: `_aws` names the namespace, the `function` dimension and each metric, and every one
    /// of them is a member at the root (EMF's rule).
    public func line(namespace: String, function: String, timestamp: Date = Date()) -> String {
        let names = Name.allCases.filter { values[$0] != nil }
        var root: [String: JSONValue] = [
            "_aws": .object([
                "Timestamp": .number((timestamp.timeIntervalSince1970 * 1000).rounded()),
                "CloudWatchMetrics": .array([
                    .object([
                        "Namespace": .string(namespace),
                        "Dimensions": .array([.array([.string("function")])]),
                        "Metrics": .array(
                            names.map { .object(["Name": .string($0.rawValue), "Unit": .string($0.unit)]) }),
                    ])
                ]),
            ]),
            "function": .string(function),
        ]
        for name in names { root[name.rawValue] = .number(values[name] ?? 0) }
        return JSONCoding.string(JSONValue.object(root))
            + "\n"
    }
}

import Codecs
import FoundationEssentials

/// The metrics of one invocation, written at its end as one CloudWatch Embedded Metric Format (EMF) object on a log
/// line of stderr — the Lambda ecosystem's way (AWS Lambda Powertools emits the same shape): CloudWatch turns the
/// line into metrics without an API call from the function.
///
/// Only counts and a duration: never a token, a name or an identifier. Not `Sendable`: it belongs to the
/// invocation's thread.
public final class InvocationMetrics {
    /// A metric's name on the EMF line. The runtime declares its own two (``coldStart``, ``durationMs``); the
    /// application declares the rest, as static members of an extension, and the runtime never names them.
    public struct Name: Hashable, Sendable {
        public let rawValue: String
        let unit: String
        /// Its place in the line's list of metrics: the runtime's first, then the application's in its own order.
        let rank: Int

        private init(_ rawValue: String, unit: String, rank: Int) {
            self.rawValue = rawValue
            self.unit = unit
            self.rank = rank
        }

        /// An application's counter, listed `rank`-th (from 0) among the application's metrics.
        public init(counter rawValue: String, rank: Int) {
            self.init(rawValue, unit: "Count", rank: 100 + rank)
        }

        /// 1 for the first invocation of a process, 0 after.
        public static let coldStart = Name("ColdStart", unit: "Count", rank: 0)
        /// From the event's arrival to the end of the post-response work.
        public static let durationMs = Name("DurationMs", unit: "Milliseconds", rank: 1)
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
        let names = values.keys.sorted { ($0.rank, $0.rawValue) < ($1.rank, $1.rawValue) }
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

import Codecs
import CaregiverPush
import Testing

/// CloudWatch Embedded Metric Format lines in a function's stderr, checked against EMF's rules: an
/// `_aws` object with a millisecond `Timestamp` and one `CloudWatchMetrics` directive naming the namespace, the
/// `function` dimension and each metric, every one of which is a member at the root.
package enum EMF {
    package struct Line {
        package let namespace: String
        package let function: String
        /// Metric name → value.
        package let values: [String: Double]
        /// Metric name → unit.
        package let units: [String: String]
    }

    /// Whether a stderr line is an EMF object rather than a log line.
    package static func isEMF(_ line: some StringProtocol) -> Bool {
        (try? JSONValue.parse(String(line)))?["_aws"] != nil
    }

    /// The EMF lines of `stderr`, each checked; a malformed one is recorded as an issue and left out.
    package static func lines(in stderr: String, sourceLocation: SourceLocation = #_sourceLocation) -> [Line] {
        stderr.split(separator: "\n").filter { isEMF($0) }.compactMap { text in
            let line = parse(String(text))
            #expect(line != nil, "not valid EMF: \(text)", sourceLocation: sourceLocation)
            return line
        }
    }

    package static func parse(_ text: String) -> Line? {
        guard let root = (try? JSONValue.parse(text))?.objectValue, let aws = root["_aws"],
            let timestamp = aws["Timestamp"]?.numberValue, timestamp > 1_700_000_000_000,
            let directives = aws["CloudWatchMetrics"]?.arrayValue, directives.count == 1,
            let namespace = directives[0]["Namespace"]?.stringValue, !namespace.isEmpty,
            directives[0]["Dimensions"] == .array([.array([.string("function")])]),
            let function = root["function"]?.stringValue,
            let metrics = directives[0]["Metrics"]?.arrayValue, !metrics.isEmpty, metrics.count <= 100
        else { return nil }
        var values: [String: Double] = [:]
        var units: [String: String] = [:]
        for metric in metrics {
            guard let name = metric["Name"]?.stringValue, let unit = metric["Unit"]?.stringValue,
                let value = root[name]?.numberValue
            else { return nil }
            values[name] = value
            units[name] = unit
        }
        return Line(namespace: namespace, function: function, values: values, units: units)
    }
}

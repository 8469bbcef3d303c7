import Codecs
import FoundationEssentials
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A swift-log handler that writes one JSON object per line to stderr (stdout is the function's protocol).
///
/// `{"ts":…,"level":…,"msg":…,"function":…,"requestId":…, <metadata>}`. Messages are constant strings; values go in
/// metadata with dotted keys (`push.token_hash`, `db.sqlstate`). Nothing here redacts: callers never put a token, a
/// JWT, a secret or a medication name in a log, and the leak-check test holds them to it.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    private let label: String
    private let sink: @Sendable (String) -> Void
    private let format: LogFormat

    /// - Parameters:
    ///   - label: the logger's label; used as `function` when metadata does not set one.
    ///   - format: the line's shape; ``LogFormat/json`` unless Lambda's logging controls ask otherwise.
    ///   - sink: receives each finished line (with its newline). Defaults to stderr.
    public init(
        label: String, format: LogFormat = .json,
        sink: @escaping @Sendable (String) -> Void = JSONLogHandler.writeToStandardError
    ) {
        self.label = label
        self.format = format
        self.sink = sink
    }

    /// Installs this handler for the whole process, at the level and in the format ``LogFormat/from(environment:)``
    /// reads (Lambda's advanced logging controls first, then `LOG_LEVEL`; default `info`, JSON).
    public static func bootstrap(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let (level, format) = LogFormat.from(environment: environment)
        LoggingSystem.bootstrap { label in
            var handler = JSONLogHandler(label: label, format: format)
            handler.logLevel = level
            return handler
        }
    }

    @Sendable public static func writeToStandardError(_ line: String) {
        StandardStreams.writeAll(Array(line.utf8), to: STDERR_FILENO)
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        switch format {
        case .json:
            sink(Self.line(level: event.level, message: event.message.description, metadata: merged, label: label))
        case .lambdaJSON:
            sink(
                Self.line(
                    level: event.level, message: event.message.description, metadata: merged, label: label,
                    lambdaKeys: true))
        case .text:
            sink(Self.textLine(level: event.level, message: event.message.description, metadata: merged, label: label))
        }
    }

    static func line(
        level: Logger.Level, message: String, metadata: Logger.Metadata, label: String, lambdaKeys: Bool = false
    ) -> String {
        // Lambda's JSON log format reads `timestamp` and a `level` of its own vocabulary (TRACE … FATAL); a level it
        // does not know counts as INFO, so `warning` would pass a WARN filter's floor unseen.
        var text = "{\"" + (lambdaKeys ? "timestamp" : "ts") + "\":" + JSONText.quote(Timestamp.rfc3339UTC(Date()))
        text += ",\"level\":" + JSONText.quote(lambdaKeys ? LogFormat.lambdaLevel(level) : level.rawValue)
        text += ",\"msg\":" + JSONText.quote(message)
        if metadata["function"] == nil { text += ",\"function\":" + JSONText.quote(label) }
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            text += "," + JSONText.quote(key) + ":" + JSONText.encode(value)
        }
        return text + "}\n"
    }
}

extension JSONLogHandler {
    /// `timestamp LEVEL message key=value …`: Lambda's Text log format, for a function configured with it.
    static func textLine(level: Logger.Level, message: String, metadata: Logger.Metadata, label: String) -> String {
        var text = Timestamp.rfc3339UTC(Date()) + " " + LogFormat.lambdaLevel(level).uppercased() + " " + message
        var members = metadata
        if members["function"] == nil { members["function"] = .string(label) }
        for (key, value) in members.sorted(by: { $0.key < $1.key }) {
            text += " " + key + "=" + JSONText.encode(value)
        }
        return text.replacing("\n", with: " ") + "\n"
    }
}

/// Minimal JSON text building for log lines, where field order matters to a human reader.
enum JSONText {
    /// `string` as a JSON string, written as ``JSONValue`` writes one: a string with nothing to escape is copied
    /// whole rather than scalar by scalar.
    static func quote(_ string: String) -> String {
        String(decoding: JSONValue.string(string).serialized ?? [], as: UTF8.self)
    }

    static func encode(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let string): quote(string)
        case .stringConvertible(let convertible):
            if let number = convertible as? any BinaryInteger {
                String(describing: number)
            } else if let number = convertible as? Double, number.isFinite {
                String(describing: number)
            } else if let flag = convertible as? Bool {
                flag ? "true" : "false"
            } else {
                quote(convertible.description)
            }
        case .array(let values): "[" + values.map(encode).joined(separator: ",") + "]"
        case .dictionary(let members):
            "{"
                + members.sorted { $0.key < $1.key }.map { quote($0.key) + ":" + encode($0.value) }
                .joined(separator: ",") + "}"
        }
    }
}

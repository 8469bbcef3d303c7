import Logging

/// The shape of a function's log lines, and the level below which nothing is written.
///
/// Lambda's advanced logging controls set `AWS_LAMBDA_LOG_FORMAT` (`JSON` or `Text`) and, for JSON,
/// `AWS_LAMBDA_LOG_LEVEL` (`TRACE`, `DEBUG`, `INFO`, `WARN`, `ERROR`, `FATAL`) in a custom runtime's environment; as
/// the official runtimes and Powertools do, the function then writes what they ask: `AWS_LAMBDA_LOG_LEVEL` wins over
/// `LOG_LEVEL`, and JSON lines carry `timestamp` and a level Lambda's filter understands. Without them (the runner,
/// Knative, tests) lines are this project's JSON at `LOG_LEVEL`.
public enum LogFormat: Sendable, Equatable {
    /// `{"ts","level","msg",…}` with swift-log's level names.
    case json
    /// Lambda's JSON log format: `{"timestamp","level","msg",…}` with Lambda's level names.
    case lambdaJSON
    /// Lambda's Text log format: `timestamp LEVEL message key=value …`.
    case text

    /// The level and format an environment asks for.
    public static func from(environment: [String: String]) -> (level: Logger.Level, format: LogFormat) {
        let format: LogFormat
        switch environment["AWS_LAMBDA_LOG_FORMAT"]?.uppercased() {
        case "JSON": format = .lambdaJSON
        case "TEXT": format = .text
        default: format = .json
        }
        if let lambda = environment["AWS_LAMBDA_LOG_LEVEL"].flatMap(level(lambdaName:)) {
            return (lambda, format)
        }
        let level = environment["LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0.lowercased()) } ?? .info
        return (level, format)
    }

    /// A Lambda log level name as swift-log's level (`WARN` → `.warning`, `FATAL` → `.critical`).
    static func level(lambdaName name: String) -> Logger.Level? {
        switch name.uppercased() {
        case "TRACE": .trace
        case "DEBUG": .debug
        case "INFO": .info
        case "WARN", "WARNING": .warning
        case "ERROR": .error
        case "FATAL", "CRITICAL": .critical
        default: nil
        }
    }

    /// swift-log's level in Lambda's vocabulary (`notice` has no own Lambda level: it is `info`).
    static func lambdaLevel(_ level: Logger.Level) -> String {
        switch level {
        case .trace: "trace"
        case .debug: "debug"
        case .info, .notice: "info"
        case .warning: "warn"
        case .error: "error"
        case .critical: "fatal"
        }
    }
}

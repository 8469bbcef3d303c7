import Foundation

/// `infra/functions.json`: the one list of the functions, what triggers each and their limits — what a host needs to
/// run them, and what the build, the release, the image and the deploy descriptors are checked against.
///
/// A function has exactly one trigger: a route (`method` and `path`: an HTTP API event per request, an API Gateway
/// response back), a `schedule` (an EventBridge "Scheduled Event" at that rate, output opaque to the host), or
/// `deploy` (`"customResource"`: run once per deploy by CloudFormation, as `db-migrate` is; the gateway never runs it).
/// A scheduled function's output is not an HTTP response, so it must never be reachable over HTTP.
public struct FunctionTable: Codable, Sendable, Equatable {
    public struct Function: Codable, Sendable, Equatable {
        public let name: String
        public let method: String?
        public let path: String?
        /// `rate(N minute|minutes|hour|hours|day|days)`, EventBridge's rate grammar (``FunctionTable/rate(_:)``).
        public let schedule: String?
        /// `customResource`: a deploy-time function (CloudFormation custom resource); no route, no schedule.
        public let deploy: String?
        /// Per-invocation timeout; longer than `PUSH_SEND_DEADLINE_MS` so that the push can finish.
        public let timeoutSeconds: Int
        public let memoryMB: Int
        /// How many invocations of this function may run at once.
        public let concurrency: Int
        /// The largest request body the function takes, in bytes (optional in the table; ``defaultMaxBodyBytes``).
        /// The runner refuses a larger body before reading it.
        public let maxBodyBytes: Int?

        /// ``maxBodyBytes``, or the functions' own limit when the table names none.
        public var bodyLimit: Int { maxBodyBytes ?? FunctionTable.defaultMaxBodyBytes }

        /// `POST /api/push/register` (API Gateway's `routeKey`); `nil` for a scheduled function.
        public var routeKey: String? {
            guard let method, let path else { return nil }
            return "\(method) \(path)"
        }

        /// How often the function runs; `nil` for a routed function. The table was checked when read, so a
        /// schedule here always parses.
        public var rate: Duration? { schedule.flatMap { try? FunctionTable.rate($0) } }
    }

    public let functions: [Function]

    /// The functions' own request-body limit (16 KiB): what the runner refuses past when the table names none.
    public static let defaultMaxBodyBytes = 16 * 1024
    /// The largest `maxBodyBytes` a table may name: the event built from such a body (base64 or JSON escapes, plus
    /// the headers) must still fit Lambda's 6 MB synchronous payload.
    public static let maxBodyBytesCeiling = 1024 * 1024

    /// Reads and checks a function table.
    /// - Throws: ``FunctionTableError`` when the file is unreadable, not this shape, names a function or a route
    ///   twice, or has a function without exactly one trigger or with a schedule that is not a `rate(…)`.
    public init(contentsOf url: URL) throws {
        try self.init(json: Data(contentsOf: url))
    }

    /// Parses and checks a function table's JSON (see ``init(contentsOf:)``).
    public init(json: Data) throws {
        let table = try JSONDecoder().decode(FunctionTable.self, from: json)
        for function in table.functions {
            if let deploy = function.deploy {
                guard function.method == nil, function.path == nil, function.schedule == nil else {
                    throw FunctionTableError.deployAndTrigger(function: function.name)
                }
                guard Self.deployKinds.contains(deploy) else {
                    throw FunctionTableError.unsupportedDeploy(function: function.name, deploy: deploy)
                }
            } else {
                try Self.checkRouteOrSchedule(function)
            }
            if let limit = function.maxBodyBytes, !(1...Self.maxBodyBytesCeiling).contains(limit) {
                throw FunctionTableError.bodyLimit(function: function.name, bytes: limit)
            }
        }
        let routeKeys = table.functions.compactMap(\.routeKey)
        guard Set(table.functions.map(\.name)).count == table.functions.count, Set(routeKeys).count == routeKeys.count
        else { throw FunctionTableError.duplicate }
        self = table
    }

    /// The `deploy` kinds a table may name: a CloudFormation custom resource's function.
    public static let deployKinds: Set<String> = ["customResource"]

    private static func checkRouteOrSchedule(_ function: Function) throws {
        switch (function.method, function.path, function.schedule) {
        case (nil, nil, nil): throw FunctionTableError.noTrigger(function: function.name)
        case (.some, .some, .some): throw FunctionTableError.routeAndSchedule(function: function.name)
        case (.some, nil, _), (nil, .some, _): throw FunctionTableError.incompleteRoute(function: function.name)
        case (_, _, .some(let schedule)):
            do {
                _ = try Self.rate(schedule)
            } catch {
                throw FunctionTableError.unsupportedSchedule(function: function.name, schedule: schedule)
            }
        case (.some, .some, nil): break
        }
    }

    public func function(named name: String) -> Function? {
        functions.first { $0.name == name }
    }

    /// The interval of an EventBridge rate expression: `rate(1 minute)`, `rate(5 minutes)`, `rate(1 hour)`,
    /// `rate(2 hours)`, `rate(1 day)`, `rate(7 days)` — a positive whole number with no sign or leading zero, one
    /// space, the unit singular for 1 and plural otherwise, as EventBridge requires.
    /// - Throws: ``FunctionTableError/unsupportedSchedule(function:schedule:)`` (with no function name) for anything
    ///   else, `cron(…)` included: the runner does not evaluate cron expressions.
    public static func rate(_ expression: String) throws -> Duration {
        let unsupported = FunctionTableError.unsupportedSchedule(function: nil, schedule: expression)
        guard expression.hasPrefix("rate("), expression.hasSuffix(")") else { throw unsupported }
        let parts = expression.dropFirst("rate(".count).dropLast().split(
            separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 2, let digits = parts.first, let unit = parts.last, let first = digits.first,
            first != "0", digits.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int(digits)
        else { throw unsupported }
        let secondsPerUnit: Int
        switch (value == 1, unit) {
        case (true, "minute"), (false, "minutes"): secondsPerUnit = 60
        case (true, "hour"), (false, "hours"): secondsPerUnit = 3600
        case (true, "day"), (false, "days"): secondsPerUnit = 86_400
        default: throw unsupported
        }
        let (seconds, overflow) = value.multipliedReportingOverflow(by: secondsPerUnit)
        guard !overflow else { throw unsupported }
        return .seconds(seconds)
    }
}

public enum FunctionTableError: Error, Equatable, CustomStringConvertible {
    case duplicate
    /// No route, no schedule, no `deploy`: nothing would ever run it.
    case noTrigger(function: String)
    /// `deploy` with a route or a schedule: a deploy-time function has no other trigger.
    case deployAndTrigger(function: String)
    /// A `deploy` other than `customResource`.
    case unsupportedDeploy(function: String, deploy: String)
    /// A route and a schedule: a scheduled function's output is not an HTTP response, so it is never routed.
    case routeAndSchedule(function: String)
    /// `method` without `path`, or `path` without `method`.
    case incompleteRoute(function: String)
    /// A schedule that is not one of EventBridge's `rate(…)` forms (cron is not supported by the runner).
    case unsupportedSchedule(function: String?, schedule: String)
    /// A `maxBodyBytes` outside 1 … ``FunctionTable/maxBodyBytesCeiling``.
    case bodyLimit(function: String, bytes: Int)

    public var description: String {
        switch self {
        case .duplicate: "the function table names a function or a route twice"
        case .noTrigger(let function):
            "function \(function) has no trigger: neither a route (method and path), a schedule nor deploy"
        case .deployAndTrigger(let function):
            "function \(function) has deploy and a route or schedule; a deploy-time function has no other trigger"
        case .unsupportedDeploy(let function, let deploy):
            "function \(function) has deploy \"\(deploy)\"; the only kind is customResource"
        case .routeAndSchedule(let function):
            "function \(function) has both a route and a schedule; a scheduled function is never routed over HTTP"
        case .incompleteRoute(let function):
            "function \(function) has only one of method and path; a route needs both"
        case .unsupportedSchedule(let function, let schedule):
            (function.map { "function \($0): " } ?? "")
                + "unsupported schedule \"\(schedule)\": the runner supports only rate(N minute|minutes|hour|hours|"
                + "day|days) (singular for 1, plural otherwise); cron expressions are not supported"
        case .bodyLimit(let function, let bytes):
            "function \(function) has maxBodyBytes \(bytes); it must be between 1 and \(FunctionTable.maxBodyBytesCeiling)"
        }
    }
}

import ExecutorTakeover
import FunctionGateway
import FunctionRuntime
import ProcessSupervision
import ArgumentParser
import Foundation
import Logging

/// The options of `gateway serve`, which `runner serve` shares (adding the FCM emulator): where to listen, how to
/// invoke, the limits, the schedules, the function table.
package struct ServeOptions: ParsableArguments {
    @Option(help: "Port to listen on; 0 picks a free one (printed on stdout).")
    var port: Int = 3000

    @Option(help: "Address to listen on.")
    var host: String = "127.0.0.1"

    @Option(help: "cold: one process per request; warm: long-lived workers on the Lambda Runtime API.")
    var mode: String = "cold"

    @Option(
        help: """
            Warm workers per function, at most its concurrency in the function table (default: its concurrency, \
            so that as many invocations run at once as the table allows).
            """)
    var warmWorkers: Int?

    @Option(
        help: """
            Largest request body accepted by any function, in bytes: lowers (never raises) each function's \
            maxBodyBytes from the function table (16384 when the table names none).
            """)
    var maxBody: Int?

    @Option(help: "How long a request may wait for a function at its concurrency limit, in milliseconds.")
    var queueTimeoutMs: Int = 2000

    @Option(help: "Seconds in-flight work (post-response pushes included) gets after SIGTERM/SIGINT.")
    var graceSeconds: Int = 15

    @Flag(help: "Add x-gateway-pid (the process that answered) to function responses. Off by default: it is internal.")
    var debugHeaders = false

    @OptionGroup var limits: HTTPLimitOptions

    @OptionGroup var schedules: ScheduleOptions

    @OptionGroup var infra: InfraOptions

    package init() {}

    /// Serves until SIGTERM/SIGINT; prints `{"event":"listening","port":…,"mode":…}` on stdout once bound. Once per
    /// process: it makes NIO's event loops Swift's global executor.
    /// - Parameters:
    ///   - label: the logger's label and `function` (`gateway` or `runner`).
    ///   - extensions: what the developer's tools add (the runner's FCM emulator); none in production.
    ///   - developerTool: the runner, whose default share of one client is the whole when it listens on a loopback
    ///     address (``HTTPLimitOptions/limits(developersMachine:)``).
    package func serve(label: String, extensions: [any GatewayExtension] = [], developerTool: Bool = false)
        async throws
    {
        // The host's tasks run on NIO's event loops, where its sockets are, rather than on Swift's own pool with a
        // hop between the two at every await (docs/decisions.md#one-executor). Nothing the host does blocks a
        // thread (it awaits its workers' pipes and exits; it makes no database call), and this runs before its
        // first task: an argument parser's command has started none.
        let oneExecutor = ExecutorTakeover.install()
        JSONLogHandler.bootstrap()
        var logger = Logger(label: label)
        logger[metadataKey: "function"] = .string(label)
        if !oneExecutor { logger.notice("tasks stay on Swift's own executor: NIO could not take it over") }
        guard let mode = Gateway.Mode(rawValue: mode) else { throw ValidationError("--mode must be cold or warm") }
        try requirePositive([("--max-body", maxBody), ("--warm-workers", warmWorkers)])
        let table = try infra.functionTable()
        let binDirectory = infra.binaryDirectory()
        let schedules = try schedules.setting()
        try infra.checkBuilt(table, in: binDirectory, schedules: schedules)
        let options = GatewayServer.Options(
            host: host, port: port, mode: mode, warmWorkers: warmWorkers, maxBody: maxBody,
            queueTimeout: .milliseconds(queueTimeoutMs), debugHeaders: debugHeaders,
            limits: try limits.limits(developersMachine: developerTool && Self.isLoopback(host)),
            schedules: schedules)
        let server = try await GatewayServer.make(
            table: table, binDirectory: binDirectory, options: options, extensions: extensions, logger: logger)
        try await server.run(grace: .seconds(graceSeconds)) { boundPort in
            let line = "{\"event\":\"listening\",\"port\":\(boundPort),\"mode\":\"\(mode.rawValue)\"}\n"
            FileHandle.standardOutput.write(Data(line.utf8))
        }
    }
}

extension ServeOptions {
    /// Whether `host` is reachable from this machine only.
    package static func isLoopback(_ host: String) -> Bool {
        guard host != "localhost" else { return true }
        guard let address = IPAddress(host) else { return false }
        return address.bytes.count == 4 ? address.bytes[0] == 127 : address == IPAddress("::1")
    }
}

/// The public port's limits against hostile or broken clients (``HTTPLimits``), as options.
package struct HTTPLimitOptions: ParsableArguments {
    @Option(help: "Largest request line plus header fields, in bytes (431 past it).")
    var maxHeaderBytes: Int = HTTPLimits().maxHeadBytes

    @Option(help: "Most header fields in one request (431 past it).")
    var maxHeaderCount: Int = HTTPLimits().maxHeaderCount

    @Option(help: "Milliseconds from a request's first byte to the end of its header fields (408 past it).")
    var headerTimeoutMs: Int = 10_000

    @Option(help: "Milliseconds from the end of the header fields to the end of the body (408 past it).")
    var bodyTimeoutMs: Int = 30_000

    @Option(help: "Milliseconds a connection may stay open with no request in progress.")
    var idleTimeoutMs: Int = 75_000

    @Option(help: "Most open connections at once; one more is answered 503 and closed.")
    var maxConnections: Int = HTTPLimits().maxConnections

    @Option(
        help: """
            Most open connections at once from one client address (one more is answered 503 and closed). Behind a \
            proxy every connection has the proxy's address: set it to --max-connections there.
            """)
    var maxConnectionsPerClient: Int = HTTPLimits().maxConnectionsPerClient

    @Option(
        help: """
            Most requests of one client in flight at once, across the functions (one more is answered 429). Default:             16; `runner serve` on a loopback address: --max-connections (one developer is every client there).
            """)
    var maxRequestsPerClient: Int?

    @Option(
        help: """
            The header the trusted proxies in front append the address they were reached from to             (x-forwarded-for), read from the right. Honoured only on connections from a --trusted-proxy.
            """)
    var clientAddressHeader: String?

    @Option(
        name: .customLong("trusted-proxy"),
        help: ArgumentHelp(
            """
            An address or CIDR block of a proxy whose --client-address-header is honoured and which is skipped when             reading it from the right (repeatable, or comma-separated).
            """, valueName: "CIDR"))
    var trustedProxies: [String] = []

    @Option(
        help: """
            The client is this many entries from the right of --client-address-header (1: the last; the number of             proxies that append to it). Default: the first entry from the right that is not a --trusted-proxy.
            """)
    var clientAddressHops: Int?

    package init() {}

    /// The limits these options ask for.
    /// - Parameter developersMachine: the runner on a loopback address, where every request is the developer's own
    ///   and one client's share would throttle their load tests.
    package func limits(developersMachine: Bool = false) throws -> HTTPLimits {
        try requirePositive([
            ("--max-requests-per-client", maxRequestsPerClient), ("--client-address-hops", clientAddressHops),
        ])
        try requirePositive([
            ("--max-header-bytes", maxHeaderBytes), ("--max-header-count", maxHeaderCount),
            ("--header-timeout-ms", headerTimeoutMs), ("--body-timeout-ms", bodyTimeoutMs),
            ("--idle-timeout-ms", idleTimeoutMs), ("--max-connections", maxConnections),
            ("--max-connections-per-client", maxConnectionsPerClient),
        ])
        var limits = HTTPLimits()
        limits.maxHeadBytes = maxHeaderBytes
        limits.maxHeaderCount = maxHeaderCount
        limits.headerTimeout = .milliseconds(headerTimeoutMs)
        limits.bodyTimeout = .milliseconds(bodyTimeoutMs)
        limits.idleTimeout = .milliseconds(idleTimeoutMs)
        limits.maxConnections = maxConnections
        limits.maxConnectionsPerClient = maxConnectionsPerClient
        limits.maxRequestsPerClient = maxRequestsPerClient ?? (developersMachine ? maxConnections : 16)
        limits.clientAddress = try clientAddressRule()
        return limits
    }
}

extension HTTPLimitOptions {
    /// The header, the trusted proxies and the hops as one rule; `nil` without a header.
    fileprivate func clientAddressRule() throws -> ClientAddressRule? {
        let blocks = try trustedProxies.flatMap { $0.split(separator: ",") }.map { text in
            let text = text.trimmingCharacters(in: .whitespaces)
            guard let block = AddressBlock(text) else {
                throw ValidationError("--trusted-proxy must be an address or a CIDR block (10.0.0.0/8, ::1/128)")
            }
            return block
        }
        guard let clientAddressHeader else {
            guard blocks.isEmpty, clientAddressHops == nil else {
                throw ValidationError("--trusted-proxy and --client-address-hops need --client-address-header")
            }
            return nil
        }
        guard !clientAddressHeader.isEmpty,
            clientAddressHeader.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") })
        else { throw ValidationError("--client-address-header must be a header name") }
        // Without trusted proxies any client could write the header and name itself or another client.
        guard !blocks.isEmpty else {
            throw ValidationError("--client-address-header needs --trusted-proxy: the proxies whose header is honoured")
        }
        return ClientAddressRule(header: clientAddressHeader, trustedProxies: blocks, hops: clientAddressHops)
    }
}

/// When the scheduled functions run (``Scheduler/Setting``), as options of `serve` and `dev`.
package struct ScheduleOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Run every scheduled function every N milliseconds instead of at its rate from the function table.",
            valueName: "N"))
    var scheduleIntervalMs: Int?

    @Flag(help: "Run no scheduled function (takes precedence over --schedule-interval-ms).")
    var noSchedules = false

    package init() {}

    package func setting() throws -> Scheduler.Setting {
        if noSchedules { return .off }
        guard let scheduleIntervalMs else { return .table }
        try requirePositive([("--schedule-interval-ms", scheduleIntervalMs)])
        return .every(.milliseconds(scheduleIntervalMs))
    }
}

/// The one check of the numeric options: each given value (`nil`: the option was not given) must be above zero.
/// - Throws: `ValidationError` naming the first option that is not.
func requirePositive(_ options: [(name: String, value: Int?)]) throws {
    for (name, value) in options {
        if let value, value <= 0 { throw ValidationError("\(name) must be positive") }
    }
}

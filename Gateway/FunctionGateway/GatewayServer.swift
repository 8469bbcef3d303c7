import ProcessSupervision
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import UnixSignals

/// Everything `gateway serve` (and `runner serve`, `runner dev`) runs: the gateway on the public port (with the
/// developer's extensions, such as the FCM emulator, when the runner adds them), the warm workers' Runtime API on a
/// private listener (127.0.0.1, an ephemeral port), the warm pools, the scheduler of the scheduled functions; and the
/// SIGTERM/SIGINT drain.
package struct GatewayServer: Sendable {
    /// How `gateway serve` was asked to run.
    package struct Options: Sendable {
        var host = "127.0.0.1"
        var port = 3000
        var mode = Gateway.Mode.cold
        /// Warm workers per function, at most its `concurrency`; `nil`: its `concurrency`
        /// (``GatewayServer/warmPoolSize(of:requested:)``).
        var warmWorkers: Int?
        /// Lowers every function's body limit (`maxBodyBytes` in the function table, 16 KiB by default).
        var maxBody: Int?
        var queueTimeout: Duration = .seconds(2)
        var debugHeaders = false
        var limits = HTTPLimits()
        var schedules = Scheduler.Setting.table
        /// Routes of the public port's router beside the functions' (`runner dev`'s console); none for `serve`.
        var additionalRoutes: (@Sendable (Router<GatewayContext>) -> Void)?

        package init(
            host: String = "127.0.0.1", port: Int = 3000, mode: Gateway.Mode = .cold, warmWorkers: Int? = nil,
            maxBody: Int? = nil, queueTimeout: Duration = .seconds(2), debugHeaders: Bool = false,
            limits: HTTPLimits = HTTPLimits(), schedules: Scheduler.Setting = .table,
            additionalRoutes: (@Sendable (Router<GatewayContext>) -> Void)? = nil
        ) {
            self.host = host
            self.port = port
            self.mode = mode
            self.warmWorkers = warmWorkers
            self.maxBody = maxBody
            self.queueTimeout = queueTimeout
            self.debugHeaders = debugHeaders
            self.limits = limits
            self.schedules = schedules
            self.additionalRoutes = additionalRoutes
        }
    }

    let gateway: Gateway
    let scheduler: Scheduler
    let responder: RouterResponder<GatewayContext>
    let workers: WorkerDirectory
    let pools: [String: WarmPool]
    let tracker: ProcessTracker
    let environment: EnvironmentBox
    let extensions: [any GatewayExtension]
    let options: Options
    let logger: Logger

    /// How many warm workers `function` gets: its `concurrency` from the function table — as many as may run at once,
    /// as Lambda runs up to the reserved concurrency — or fewer when `--warm-workers` asks for fewer (tests, a
    /// developer's machine). Never more: a worker beyond the cap would only hold a process and a connection.
    package static func warmPoolSize(of function: FunctionTable.Function, requested: Int?) -> Int {
        max(1, min(requested ?? function.concurrency, function.concurrency))
    }

    /// - Parameter extensions: what the developer's tools serve beside the functions (none in production).
    package static func make(
        table: FunctionTable, binDirectory: URL, options: Options, extensions: [any GatewayExtension] = [],
        logger: Logger
    ) async throws -> GatewayServer {
        let environment = EnvironmentBox(ProcessInfo.processInfo.environment)
        let tracker = ProcessTracker()
        let workers = WorkerDirectory()
        var pools: [String: WarmPool] = [:]
        if options.mode == .warm {
            // With schedules off, a scheduled function never runs: no workers for it; a deploy-time one never does.
            for function in table.functions
            where function.routeKey != nil || (function.schedule != nil && options.schedules != .off) {
                pools[function.name] = WarmPool(
                    function: function, size: Self.warmPoolSize(of: function, requested: options.warmWorkers),
                    binDirectory: binDirectory,
                    directory: workers, logger: logger)
            }
        }
        let gateway = Gateway(
            table: table, mode: options.mode,
            cold: ColdInvoker(binDirectory: binDirectory, environment: environment, tracker: tracker),
            pools: pools, maxBodyBytes: options.maxBody, queueTimeout: options.queueTimeout,
            debugHeaders: options.debugHeaders, limits: options.limits, logger: logger)
        let scheduler = Scheduler(
            table: table, setting: options.schedules, gateway: gateway,
            region: environment.value["AWS_REGION"] ?? "us-east-1", logger: logger)
        // The public port: the function routes (through the middleware) and, when asked for, the emulator's.
        let router = Router(context: GatewayContext.self)
        router.add(middleware: GatewayMiddleware(gateway: gateway))
        options.additionalRoutes?(router)
        // The extensions' routes come after the function routes (the middleware answers those first).
        for tool in extensions { tool.addRoutes(to: router) }
        return GatewayServer(
            gateway: gateway, scheduler: scheduler, responder: router.buildResponder(), workers: workers,
            pools: pools, tracker: tracker, environment: environment, extensions: extensions, options: options,
            logger: logger)
    }

    /// Serves until SIGTERM/SIGINT, then drains: new requests get 503, in-flight requests and function work
    /// (post-response pushes included) get `grace` to finish, what remains is killed, and the listener closes.
    package func run(grace: Duration, onBound: @escaping @Sendable (Int) -> Void) async throws {
        // The Runtime API listener comes up first: the workers, started once the public port is bound, need its port.
        let runtimePort = AsyncStream<Int>.makeStream()
        let runtimeAPI = RuntimeAPIServer(workers: workers) { port in
            if let port { runtimePort.continuation.yield(port) }
            runtimePort.continuation.finish()
        }
        var services: [any Service] = [runtimeAPI]
        for tool in extensions { services += try await tool.services(logger: logger) }
        let app = Application(
            responder: responder,
            server: GuardedHTTP1Channel.builder(
                limits: options.limits,
                bodyLimit: { [gateway] method, path in
                    gateway.route(path: path, method: method).function.map(gateway.bodyLimit(of:))
                }, logger: logger),
            configuration: .init(
                address: .hostname(options.host, port: options.port), serverName: "caregiver-push-gateway"),
            onServerRunning: { channel in
                var ports = runtimePort.stream.makeAsyncIterator()
                let privatePort = await ports.next() ?? 0
                let boundPort = channel.localAddress?.port ?? options.port
                await self.started(port: boundPort, runtimePort: privatePort)
                onBound(boundPort)
            },
            logger: logger)
        services.append(app)
        let group = ServiceGroup(
            configuration: .init(services: services, gracefulShutdownSignals: [], logger: logger))
        enum Finished { case server, drained }
        try await withThrowingTaskGroup(of: Finished.self) { tasks in
            tasks.addTask {
                try await group.run()
                return .server
            }
            tasks.addTask {
                for await signal in await UnixSignalsSequence(trapping: .sigterm, .sigint) {
                    logger.info("draining", metadata: ["signal": .string(String(describing: signal))])
                    break
                }
                try Task.checkCancellation()
                await drain(grace: grace)
                await group.triggerGracefulShutdown()
                return .drained
            }
            // After a drain, let the server close by itself; if the server ended first, stop waiting for a signal.
            if try await tasks.next() == .drained {
                try await tasks.waitForAll()
            } else {
                tasks.cancelAll()
            }
        }
        scheduler.stop()
        for tool in extensions { tool.stopped() }
        logger.info("stopped")
    }

    private func started(port: Int, runtimePort: Int) async {
        // What the extensions add to the functions' environment (the emulator's URLs name its port) comes first.
        for tool in extensions {
            environment.merge(await tool.functionEnvironment(current: environment.value, logger: logger))
        }
        for pool in pools.values {
            await pool.start(environment: environment.value, runtimeAPIBase: "127.0.0.1:\(runtimePort)")
        }
        if options.schedules == .off { logger.info("schedules off") }
        scheduler.start()
        logger.info("listening", metadata: ["port": .stringConvertible(port), "mode": .string(gateway.mode.rawValue)])
    }

    /// New function binaries are in place: warm workers are restarted (each is replaced as it exits).
    package func reloadFunctions() async {
        for pool in pools.values { await pool.restartWorkers() }
    }

    private func drain(grace: Duration) async {
        scheduler.stop()
        gateway.beginDrain()
        let deadline = ContinuousClock.now + grace
        while await isBusy(), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(50))
        }
        let unfinished = await isBusy()
        for pool in pools.values { await pool.shutDown() }
        tracker.killAll()
        if unfinished { logger.warning("grace period over: unfinished function work was killed") }
        // Give terminated workers a moment to leave before the listener closes.
        try? await Task.sleep(for: .milliseconds(200))
        for pool in pools.values { await pool.killAll() }
    }

    /// Requests, function work, or scheduled runs (one waiting at its function's concurrency cap included).
    private func isBusy() async -> Bool {
        if await gateway.isBusy(tracker: tracker) { return true }
        return scheduler.hasRunsInProgress
    }
}

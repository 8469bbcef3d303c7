import OpenSSLCrypto
import ProcessSupervision
import CaregiverPush
import FCMEmulator
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import UnixSignals

/// Everything `runner serve` (and `runner dev`) runs: the gateway (with the FCM emulator when asked for) on the
/// public port, the warm workers' Runtime API on a private listener (127.0.0.1, an ephemeral port), the warm pools,
/// the scheduler of the scheduled functions; and the SIGTERM/SIGINT drain.
struct GatewayServer: Sendable {
    /// How `runner serve` was asked to run.
    struct Options: Sendable {
        var host = "127.0.0.1"
        var port = 3000
        var mode = Gateway.Mode.cold
        var warmWorkers = 2
        /// Lowers every function's body limit (`maxBodyBytes` in the function table, 16 KiB by default).
        var maxBody: Int?
        var queueTimeout: Duration = .seconds(2)
        var fcmEmulator = false
        /// `runner dev`: the functions fetch the demo's JWKS from the emulator's TLS port (`SUPABASE_JWKS_URL`).
        var demoJWKS = false
        var debugHeaders = false
        var limits = HTTPLimits()
        var schedules = Scheduler.Setting.table
        /// Routes of the public port's router beside the functions' (`runner dev`'s console); none for `serve`.
        var additionalRoutes: (@Sendable (Router<GatewayContext>) -> Void)?
    }

    let gateway: Gateway
    let scheduler: Scheduler
    let responder: RouterResponder<GatewayContext>
    let runtimeResponder: RouterResponder<GatewayContext>
    let pools: [String: WarmPool]
    let tracker: ProcessTracker
    let environment: EnvironmentBox
    let emulator: (FCMEmulator, ServiceAccountKey)?
    /// The emulator's TLS + HTTP/2 port's throwaway CA and certificate: the functions talk to FCM over it, as in
    /// production; the plain port keeps the inspection routes (`/_emulator/fcm/…`) for curl.
    let emulatorTLS: EmulatorCertificates?
    let options: Options
    let logger: Logger

    /// The emulator's throwaway key: the runner signs nothing with it, the functions do.
    struct ServiceAccountKey: Sendable {
        let clientEmail: String
        let keyID: String
        let privateKeyPEM: String
    }

    static func make(
        table: FunctionTable, binDirectory: URL, options: Options, logger: Logger
    ) async throws -> GatewayServer {
        let environment = EnvironmentBox(ProcessInfo.processInfo.environment)
        let tracker = ProcessTracker()
        let workers = WorkerDirectory()
        var pools: [String: WarmPool] = [:]
        if options.mode == .warm {
            // With schedules off, a scheduled function never runs: no workers for it.
            for function in table.functions where function.routeKey != nil || options.schedules != .off {
                pools[function.name] = WarmPool(
                    function: function, size: min(options.warmWorkers, function.concurrency),
                    binDirectory: binDirectory,
                    directory: workers, logger: logger)
            }
        }
        let gateway = Gateway(
            table: table, mode: options.mode,
            cold: ColdInvoker(binDirectory: binDirectory, environment: environment, tracker: tracker),
            pools: pools, maxBodyBytes: options.maxBody, queueTimeout: options.queueTimeout,
            debugHeaders: options.debugHeaders, logger: logger)
        let scheduler = Scheduler(
            table: table, setting: options.schedules, gateway: gateway,
            region: environment.value["AWS_REGION"] ?? "us-east-1", logger: logger)
        // The public port: the function routes (through the middleware) and, when asked for, the emulator's.
        let router = Router(context: GatewayContext.self)
        router.add(middleware: GatewayMiddleware(gateway: gateway))
        options.additionalRoutes?(router)
        let runtimeRouter = Router(context: GatewayContext.self)
        RuntimeAPIRoutes.add(to: runtimeRouter, workers: workers)
        var emulator: (FCMEmulator, ServiceAccountKey)?
        var emulatorTLS: EmulatorCertificates?
        if options.fcmEmulator {
            let key = try PrivateKey.generateRSA()
            let account = ServiceAccountKey(
                clientEmail:
                    "runner-\(UUID().uuidString.prefix(8).lowercased())@local-emulator.iam.gserviceaccount.com",
                keyID: UUID().uuidString.lowercased(), privateKeyPEM: try key.pemPKCS8())
            let instance = FCMEmulator(
                account: .init(
                    projectID: "local-emulator", clientEmail: account.clientEmail, privateKeyID: account.keyID,
                    publicKeyPEM: try key.publicKeyPEM()))
            // The public port gets the inspection routes only: the JWKS routes stay on the loopback TLS port.
            instance.addRoutes(to: router, jwksRoutes: false)
            emulator = (instance, account)
            emulatorTLS = try EmulatorCertificates.make(
                in: NSTemporaryDirectory() + "runner-fcm-tls-\(UUID().uuidString.prefix(8).lowercased())",
                host: "127.0.0.1")
        }
        return GatewayServer(
            gateway: gateway, scheduler: scheduler, responder: router.buildResponder(),
            runtimeResponder: runtimeRouter.buildResponder(),
            pools: pools, tracker: tracker, environment: environment, emulator: emulator, emulatorTLS: emulatorTLS,
            options: options, logger: logger)
    }

    /// Serves until SIGTERM/SIGINT, then drains: new requests get 503, in-flight requests and function work
    /// (post-response pushes included) get `grace` to finish, what remains is killed, and the listener closes.
    func run(grace: Duration, onBound: @escaping @Sendable (Int) -> Void) async throws {
        // The Runtime API listener comes up first: the workers, started once the public port is bound, need its port.
        let runtimePort = AsyncStream<Int>.makeStream()
        let runtimeAPI = Application(
            responder: runtimeResponder,
            configuration: .init(address: .hostname("127.0.0.1", port: 0), serverName: "caregiver-push-runtime-api"),
            onServerRunning: { channel in
                runtimePort.continuation.yield(channel.localAddress?.port ?? 0)
                runtimePort.continuation.finish()
            },
            logger: logger)
        // The emulator's TLS + HTTP/2 port (loopback, ephemeral), when there is an emulator.
        let emulatorPort = AsyncStream<Int>.makeStream()
        var services: [any Service] = [runtimeAPI]
        if let (emulator, _) = emulator, let emulatorTLS {
            services.append(
                try await emulator.application(
                    port: 0, transport: .tls(emulatorTLS), jwksRoutes: options.demoJWKS, logger: logger
                ) { port in
                    emulatorPort.continuation.yield(port)
                    emulatorPort.continuation.finish()
                })
        } else {
            emulatorPort.continuation.finish()
        }
        let app = Application(
            responder: responder,
            server: GuardedHTTP1Channel.builder(
                limits: options.limits,
                bodyLimit: { [gateway] method, path in
                    gateway.route(path: path, method: method).function.map(gateway.bodyLimit(of:))
                }, logger: logger),
            configuration: .init(
                address: .hostname(options.host, port: options.port), serverName: "caregiver-push-runner"),
            onServerRunning: { channel in
                var ports = runtimePort.stream.makeAsyncIterator()
                let privatePort = await ports.next() ?? 0
                var tlsPorts = emulatorPort.stream.makeAsyncIterator()
                let tlsPort = await tlsPorts.next()
                let boundPort = channel.localAddress?.port ?? options.port
                await self.started(port: boundPort, runtimePort: privatePort, emulatorTLSPort: tlsPort)
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
        // The emulator's server key and CA certificate were for this run only.
        emulatorTLS?.removeDirectory()
        logger.info("stopped")
    }

    private func started(port: Int, runtimePort: Int, emulatorTLSPort: Int?) async {
        if let (emulator, key) = emulator, let emulatorTLSPort, let emulatorTLS {
            // The functions reach the emulator as they reach Google: TLS + HTTP/2, verified against its CA.
            let base = "https://127.0.0.1:\(emulatorTLSPort)"
            await emulator.bound(tokenURL: base + "/token")
            let keyFile = ServiceAccount.keyFileJSON(
                projectID: "local-emulator", clientEmail: key.clientEmail, privateKeyID: key.keyID,
                privateKeyPEM: key.privateKeyPEM, tokenURI: base + "/token")
            var extra = [
                "FCM_SERVICE_ACCOUNT_JSON": Data(keyFile.utf8).base64EncodedString(),
                "FCM_API_BASE_URL": base,
                "SSL_CERT_FILE": emulatorTLS.caFile,
            ]
            if options.demoJWKS { extra["SUPABASE_JWKS_URL"] = base + SupabaseJWKSRoutes.path }
            logger.info(
                "fcm emulator listening over TLS + HTTP/2",
                metadata: ["port": .stringConvertible(emulatorTLSPort), "tls.ca_file": .string(emulatorTLS.caFile)])
            extra["PUSH_ENVIRONMENT"] = environment.value["PUSH_ENVIRONMENT"] ?? "DEV"
            environment.merge(extra)
        }
        for pool in pools.values {
            await pool.start(environment: environment.value, runtimeAPIBase: "127.0.0.1:\(runtimePort)")
        }
        if options.schedules == .off { logger.info("schedules off") }
        scheduler.start()
        logger.info("listening", metadata: ["port": .stringConvertible(port), "mode": .string(gateway.mode.rawValue)])
    }

    /// New function binaries are in place: warm workers are restarted (each is replaced as it exits).
    func reloadFunctions() async {
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

import ArgumentParser
import CaregiverPush
import FCMEmulator
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals

/// `runner serve`: the local function host (SPEC §10).
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve", abstract: "Serve the function table over HTTP, invoking the built functions cold or warm.")

    @Option(help: "Port to listen on; 0 picks a free one (printed on stdout).")
    var port: Int = 3000

    @Option(help: "Address to listen on.")
    var host: String = "127.0.0.1"

    @Option(help: "cold: one process per request; warm: long-lived workers on the Lambda Runtime API.")
    var mode: String = "cold"

    @Option(help: "Warm workers per function.")
    var warmWorkers: Int = 2

    @Option(help: "Largest request body accepted, in bytes.")
    var maxBody: Int = 1024 * 1024

    @Option(help: "How long a request may wait for a function at its concurrency limit, in milliseconds.")
    var queueTimeoutMs: Int = 2000

    @Option(help: "Seconds in-flight work (post-response pushes included) gets after SIGTERM/SIGINT.")
    var graceSeconds: Int = 15

    @Flag(help: "Also serve the FCM emulator here and point the functions at it with a throwaway service account.")
    var fcmEmulator = false

    @OptionGroup var infra: InfraOptions

    func run() async throws {
        JSONLogHandler.bootstrap()
        var logger = Logger(label: "runner")
        logger[metadataKey: "function"] = "runner"
        guard let mode = Gateway.Mode(rawValue: mode) else { throw ValidationError("--mode must be cold or warm") }
        let table = try infra.functionTable()
        let binDirectory = infra.binaryDirectory()
        for function in table.functions
        where !FileManager.default.isExecutableFile(atPath: binDirectory.appendingPathComponent(function.name).path) {
            throw ValidationError("\(function.name) is not built in \(binDirectory.path); run `swift build` first")
        }
        let server = try await GatewayServer.make(
            table: table, mode: mode, binDirectory: binDirectory, host: host, port: port, warmWorkers: warmWorkers,
            maxBody: maxBody, queueTimeout: .milliseconds(queueTimeoutMs), fcmEmulator: fcmEmulator, logger: logger)
        try await server.run(grace: .seconds(graceSeconds)) { boundPort in
            let line = "{\"event\":\"listening\",\"port\":\(boundPort),\"mode\":\"\(mode.rawValue)\"}\n"
            FileHandle.standardOutput.write(Data(line.utf8))
        }
    }
}

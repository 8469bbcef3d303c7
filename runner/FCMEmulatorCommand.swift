import ArgumentParser
import CaregiverPush
import FCMEmulator
import Foundation
import Logging

/// `runner fcm-emulator`: Google's OAuth token endpoint and FCM `messages:send`, locally.
struct FCMEmulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fcm-emulator",
        abstract: "Serve a local FCM emulator (OAuth token + messages:send) that records what it receives.",
        discussion: """
            Prints {"event":"listening","port":N,"tokenURL":…} on stdout once bound. Device tokens containing a \
            marker (UNREGISTERED, INVALID_TOKEN, UNAVAILABLE_ONCE, …) get that FCM error; see FCMErrorScenario. \
            Reads no environment variable.
            """)

    @Option(help: "The service-account key file whose public half verifies OAuth assertions.")
    var serviceAccount: String

    @Option(help: "Port to listen on; 0 picks a free one.")
    var port: Int = 0

    @Option(help: "Address to listen on.")
    var host: String = "127.0.0.1"

    @Option(help: "Delay before answering each messages:send, in milliseconds.")
    var delayMs: Int = 0

    func run() async {
        await reportingErrors { try await start() }
    }

    private func start() async throws {
        JSONLogHandler.bootstrap()
        var logger = Logger(label: "fcm-emulator")
        logger[metadataKey: "function"] = "fcm-emulator"
        guard let data = FileManager.default.contents(atPath: serviceAccount) else {
            throw ValidationError("cannot read \(serviceAccount)")
        }
        let account = try ServiceAccount(json: Array(data), variable: "--service-account")
        let emulator = FCMEmulator(
            account: try FCMEmulator.Account(serviceAccount: account),
            state: FCMEmulatorState(responseDelayMilliseconds: delayMs))
        let host = self.host
        try await emulator.run(host: host, port: port, logger: logger) { port in
            let line = "{\"event\":\"listening\",\"port\":\(port),\"tokenURL\":\"http://\(host):\(port)/token\"}\n"
            FileHandle.standardOutput.write(Data(line.utf8))
        }
    }
}

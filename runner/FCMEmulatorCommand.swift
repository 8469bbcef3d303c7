import Codecs
import OpenSSLCrypto
import FunctionRuntime
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
            Prints {"event":"listening","port":N,"baseURL":…,"tokenURL":…} on stdout once bound (with "caFile" in \
            TLS mode). Device tokens containing a marker (UNREGISTERED, INVALID_TOKEN, UNAVAILABLE_ONCE, …) get that \
            FCM error; see FCMErrorScenario. With --tls it speaks TLS with ALPN h2, like fcm.googleapis.com, under \
            a throwaway CA made at start: give clients its certificate (SSL_CERT_FILE=<caFile>). Reads no \
            environment variable.
            """)

    @Option(help: "The service-account key file whose public half verifies OAuth assertions.")
    var serviceAccount: String

    @Option(help: "Port to listen on; 0 picks a free one.")
    var port: Int = 0

    @Option(help: "Address to listen on.")
    var host: String = "127.0.0.1"

    @Option(help: "Delay before answering each messages:send, in milliseconds.")
    var delayMs: Int = 0

    @Flag(help: "Serve TLS + HTTP/2 (ALPN h2) with a throwaway CA instead of plain HTTP/1.1.")
    var tls = false

    @Option(help: "Directory for the throwaway CA and server certificate (--tls); a new temporary one by default.")
    var tlsDirectory: String?

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
        // The key file as the functions read it; its private key is used only to derive the public half.
        let account = try ServiceAccount(json: Array(data), variable: "--service-account")
        let emulator = FCMEmulator(
            account: FCMEmulator.Account(
                projectID: account.projectID, clientEmail: account.clientEmail, privateKeyID: account.privateKeyID,
                publicKeyPEM: try PrivateKey(pem: account.privateKeyPEM).publicKeyPEM()),
            state: FCMEmulatorState(responseDelayMilliseconds: delayMs))
        let transport: FCMEmulator.Transport
        if tls {
            let directory =
                tlsDirectory ?? NSTemporaryDirectory() + "fcm-emulator-tls-\(UUID().uuidString.prefix(8).lowercased())"
            transport = .tls(try EmulatorCertificates.make(in: directory, host: host))
        } else {
            transport = .plain
        }
        let host = self.host
        // A directory of our own making is removed when the emulator stops; one the caller named is theirs.
        defer { if tlsDirectory == nil, case .tls(let certificates) = transport { certificates.removeDirectory() } }
        try await emulator.run(host: host, port: port, transport: transport, logger: logger) { port in
            var fields: [String: JSONValue] = [
                "event": .string("listening"), "port": .number(Double(port)),
                "baseURL": .string("\(transport.scheme)://\(host):\(port)"),
                "tokenURL": .string("\(transport.scheme)://\(host):\(port)/token"),
            ]
            if case .tls(let certificates) = transport { fields["caFile"] = .string(certificates.caFile) }
            let encoder = JSONCoding.encoder()
            let line = (try? encoder.encode(JSONValue.object(fields))) ?? Data("{}".utf8)
            FileHandle.standardOutput.write(line + Data("\n".utf8))
        }
    }
}

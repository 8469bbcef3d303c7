import OpenSSLCrypto
import CaregiverPush
import FCMEmulator
import Foundation
import Logging
import Synchronization

/// The FCM emulator served from this process, on its own tasks, while the benchmark blocks its main thread on the
/// dispatcher (which, like a function, works synchronously).
struct InProcessEmulator {
    let port: Int
    let state: FCMEmulatorState
    let serviceAccountJSON: String
    /// The throwaway CA in TLS mode (`SSL_CERT_FILE` for whoever talks to it), `nil` for plain HTTP/1.1.
    let caFile: String?

    var baseURL: String { "\(caFile == nil ? "http" : "https")://127.0.0.1:\(port)" }

    /// What a function's environment needs to reach it.
    var environment: [String: String] {
        var values = [
            "FCM_API_BASE_URL": baseURL,
            "FCM_SERVICE_ACCOUNT_JSON": Data(serviceAccountJSON.utf8).base64EncodedString(),
        ]
        if let caFile { values["SSL_CERT_FILE"] = caFile }
        return values
    }

    /// - Parameter tls: TLS with ALPN h2 under a throwaway CA (as fcm.googleapis.com), else plain HTTP/1.1.
    static func start(delayMilliseconds: Int, tls: Bool = true) throws -> InProcessEmulator {
        let key = try PrivateKey.generateRSA()
        let clientEmail = "bench-\(UUID().uuidString.prefix(8).lowercased())@bench.iam.gserviceaccount.com"
        let account = FCMEmulator.Account(
            projectID: "bench", clientEmail: clientEmail, privateKeyID: "bench-key",
            publicKeyPEM: try key.publicKeyPEM())
        let state = FCMEmulatorState(responseDelayMilliseconds: delayMilliseconds)
        let emulator = FCMEmulator(account: account, state: state)
        let bound = Mutex<Int?>(nil)
        let ready = DispatchSemaphore(value: 0)
        var quiet = Logger(label: "fcm-emulator")
        quiet.logLevel = .critical
        let logger = quiet
        let certificates =
            tls
            ? try EmulatorCertificates.make(
                in: NSTemporaryDirectory() + "bench-fcm-tls-\(UUID().uuidString.prefix(8).lowercased())",
                host: "127.0.0.1") : nil
        let transport: FCMEmulator.Transport = certificates.map { .tls($0) } ?? .plain
        Task.detached {
            try await emulator.run(port: 0, transport: transport, logger: logger) { port in
                bound.withLock { $0 = port }
                ready.signal()
            }
        }
        guard ready.wait(timeout: .now() + 10) == .success, let port = bound.withLock({ $0 }) else {
            throw BenchmarkError("the emulator did not start")
        }
        let json = ServiceAccountKeyFile.json(
            projectID: "bench", clientEmail: clientEmail, privateKeyID: "bench-key", privateKeyPEM: try key.pemPKCS8(),
            tokenURI: "\(transport.scheme)://127.0.0.1:\(port)/token")
        return InProcessEmulator(
            port: port, state: state, serviceAccountJSON: json, caFile: certificates?.caFile)
    }
}

struct BenchmarkError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

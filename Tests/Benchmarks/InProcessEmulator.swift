import OpenSSLCrypto
import CaregiverPush
import FCMEmulator
import Foundation
import TestFixtures
import Logging
import Synchronization

/// What the benchmarks send to in Google's place: the FCM emulator, in this process (``InProcessEmulator``) or in a
/// process of its own (``EmulatorProcess``), and what it counted.
protocol FCMStandIn {
    var port: Int { get }
    var serviceAccountJSON: String { get }
    /// The throwaway CA in TLS mode (`SSL_CERT_FILE` for whoever talks to it), `nil` for plain HTTP/1.1.
    var caFile: String? { get }
    /// How many `messages:send` requests the emulator has received so far.
    func requestCount() -> Int
    /// Connections that carried the requests received since `index`, the most streams in flight on one connection
    /// since the last reset, and whether every one of those requests was an HTTP/2 stream.
    func connectionUsage(since index: Int) -> (connections: Int, maxConcurrentStreams: Int, allHTTP2: Bool)
    /// Starts counting concurrent streams afresh (the previous device count's peak would otherwise stay).
    func resetStreamCount()
    /// How many `messages:send` the emulator has answered 200, and how many access tokens it has minted, so far.
    func counts() -> (delivered: Int, mints: Int)
    /// CPU milliseconds (user + system) the stand-in's own process has used so far; `nil` when it is this process.
    func processCPUMilliseconds() -> Double?
}

extension FCMStandIn {
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
}

/// The FCM emulator served from this process, on its own tasks, while the benchmark blocks its main thread on the
/// dispatcher (which, like a function, works synchronously).
struct InProcessEmulator: FCMStandIn {
    let port: Int
    let state: FCMEmulatorState
    let serviceAccountJSON: String
    let caFile: String?

    func processCPUMilliseconds() -> Double? { nil }

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

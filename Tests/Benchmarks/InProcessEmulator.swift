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

    var baseURL: String { "http://127.0.0.1:\(port)" }

    static func start(delayMilliseconds: Int) throws -> InProcessEmulator {
        let key = try PrivateKey.generateRSA()
        let clientEmail = "bench-\(UUID().uuidString.prefix(8).lowercased())@bench.iam.gserviceaccount.com"
        let account = FCMEmulator.Account(
            projectID: "bench", clientEmail: clientEmail, privateKeyID: "bench-key", publicKeyPEM: try key.publicKeyPEM())
        let state = FCMEmulatorState(responseDelayMilliseconds: delayMilliseconds)
        let emulator = FCMEmulator(account: account, state: state)
        let bound = Mutex<Int?>(nil)
        let ready = DispatchSemaphore(value: 0)
        var quiet = Logger(label: "fcm-emulator")
        quiet.logLevel = .critical
        let logger = quiet
        Task.detached {
            try await emulator.run(port: 0, logger: logger) { port in
                bound.withLock { $0 = port }
                ready.signal()
            }
        }
        guard ready.wait(timeout: .now() + 10) == .success, let port = bound.withLock({ $0 }) else {
            throw BenchmarkError("the emulator did not start")
        }
        let json = ServiceAccount.keyFileJSON(
            projectID: "bench", clientEmail: clientEmail, privateKeyID: "bench-key", privateKeyPEM: try key.pemPKCS8(),
            tokenURI: "http://127.0.0.1:\(port)/token")
        return InProcessEmulator(port: port, state: state, serviceAccountJSON: json)
    }
}

struct BenchmarkError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

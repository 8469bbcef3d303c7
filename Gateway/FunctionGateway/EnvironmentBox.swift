import Synchronization

/// The functions' environment, completed once the server knows its port (the FCM emulator's URLs name it).
final class EnvironmentBox: Sendable {
    private let storage: Mutex<[String: String]>

    init(_ environment: [String: String]) { storage = Mutex(environment) }

    var value: [String: String] { storage.withLock { $0 } }

    func merge(_ extra: [String: String]) { storage.withLock { $0.merge(extra) { _, new in new } } }
}

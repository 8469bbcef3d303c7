import Foundation
import Hummingbird
import Logging

extension FCMEmulator {
    /// Serves the emulator on its own port until the task is cancelled or a termination signal arrives.
    /// - Parameters:
    ///   - host: the address to listen on (loopback).
    ///   - port: 0 for any free port.
    ///   - onBound: called with the bound port once the server listens.
    public func run(host: String = "127.0.0.1", port: Int, logger: Logger, onBound: @escaping @Sendable (Int) -> Void)
        async throws
    {
        let router = Router(context: BasicRequestContext.self)
        addRoutes(to: router)
        let app = Application(
            router: router, configuration: .init(address: .hostname(host, port: port), serverName: "fcm-emulator"),
            onServerRunning: { channel in
                let boundPort = channel.localAddress?.port ?? port
                await self.bound(host: host, port: boundPort)
                onBound(boundPort)
            },
            logger: logger)
        try await app.runService()
    }
}

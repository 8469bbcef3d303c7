import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOSSL
import ServiceLifecycle

/// The emulator's own request context: Hummingbird's basic one plus the channel the request arrived on, so that the
/// emulator can tell HTTP/2 streams from HTTP/1.1 requests and count the connections they share.
public struct EmulatorRequestContext: RequestContext, ConnectionCarryingContext {
    public var coreContext: CoreRequestContextStorage
    public let channel: (any Channel)?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}

/// A request context that knows its channel (the emulator's own); other contexts (the runner's) count nothing.
public protocol ConnectionCarryingContext {
    var channel: (any Channel)? { get }
}

extension FCMEmulator {
    /// How the emulator's own port speaks.
    public enum Transport: Sendable {
        /// Plain HTTP/1.1 (the runner's gateway port, clients that need it).
        case plain
        /// TLS with ALPN `h2` (HTTP/1.1 over TLS for clients that do not offer `h2`), as `fcm.googleapis.com`.
        case tls(EmulatorCertificates)

        public var scheme: String {
            if case .tls = self { "https" } else { "http" }
        }
    }

    /// Serves the emulator on its own port until the task is cancelled or a termination signal arrives.
    /// - Parameters:
    ///   - host: the address to listen on (loopback).
    ///   - port: 0 for any free port.
    ///   - transport: plain HTTP/1.1, or TLS + HTTP/2.
    ///   - onBound: called with the bound port once the server listens.
    /// Serves until stopped; the JWKS routes only when `host` is a loopback address.
    public func run(
        host: String = "127.0.0.1", port: Int, transport: Transport = .plain, logger: Logger,
        onBound: @escaping @Sendable (Int) -> Void
    ) async throws {
        try await application(
            host: host, port: port, transport: transport, jwksRoutes: Self.isLoopback(host), logger: logger,
            onBound: onBound
        )
        .runService()
    }

    /// The emulator's server as a service, for a host that runs it beside others (`runner serve --fcm-emulator`).
    /// - Parameter jwksRoutes: serve the fake Supabase JWKS too; ignored unless `host` is a loopback address.
    public func application(
        host: String = "127.0.0.1", port: Int, transport: Transport, jwksRoutes: Bool = false, logger: Logger,
        onBound: @escaping @Sendable (Int) -> Void
    ) async throws -> some ApplicationProtocol {
        let router = Router(context: EmulatorRequestContext.self)
        addRoutes(to: router, jwksRoutes: jwksRoutes && Self.isLoopback(host))
        let server: HTTPServerBuilder
        switch transport {
        case .plain:
            server = .http1()
        case .tls(let certificates):
            let chain = try NIOSSLCertificate.fromPEMFile(certificates.certificateFile).map {
                NIOSSLCertificateSource.certificate($0)
            }
            let key = try NIOSSLPrivateKey(file: certificates.privateKeyFile, format: .pem)
            let tls = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key))
            server = try .http2Upgrade(tlsConfiguration: tls)
        }
        await state.setTransport(tls: transport.scheme == "https")
        let scheme = transport.scheme
        let app = Application(
            router: router, server: server,
            configuration: .init(address: .hostname(host, port: port), serverName: "fcm-emulator"),
            onServerRunning: { channel in
                let boundPort = channel.localAddress?.port ?? port
                await self.bound(tokenURL: "\(scheme)://\(host):\(boundPort)/token")
                onBound(boundPort)
            },
            logger: logger)
        return app
    }
}

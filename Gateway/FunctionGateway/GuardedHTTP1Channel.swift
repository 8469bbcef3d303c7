import Hummingbird
import HummingbirdCore
import Logging
import NIOCore

/// Hummingbird's HTTP/1.1 channel with ``ConnectionGuard`` in front of the HTTP decoder and ``RequestPhaseHandler``
/// behind it, so that the guard knows where each request begins and ends.
struct GuardedHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value

    let inner: HTTP1Channel
    let limits: HTTPLimits
    let connections: ConnectionCount
    let logger: Logger

    /// The body limit of the function routed at a method and path (`nil`: not a function route).
    typealias BodyLimit = @Sendable (_ method: String, _ path: String) -> Int?

    init(
        responder: @escaping HTTPChannelHandler.Responder, limits: HTTPLimits, bodyLimit: @escaping BodyLimit,
        logger: Logger
    ) {
        // NIO's decoder limits stay as a second line behind the guard's (it answers 400 where the guard says 431).
        let decoder = HTTP1Channel.Configuration.DecoderConfiguration(
            maxHeaderFieldSize: limits.maxHeadBytes * 2, maxHeaderListSize: limits.maxHeadBytes * 2,
            maxHeaderFieldCount: limits.maxHeaderCount * 2)
        inner = HTTP1Channel(
            responder: responder,
            configuration: .init(
                additionalChannelHandlers: [RequestPhaseHandler(limits: limits, bodyLimit: bodyLimit)],
                httpDecoderConfiguration: decoder))
        self.limits = limits
        self.connections = ConnectionCount()
        self.logger = logger
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(
                ConnectionGuard(limits: limits, connections: connections, logger: self.logger))
        }.flatMap {
            inner.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }

    /// The server builder for `Application(server:)`.
    static func builder(limits: HTTPLimits, bodyLimit: @escaping BodyLimit, logger: Logger) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in
            GuardedHTTP1Channel(responder: responder, limits: limits, bodyLimit: bodyLimit, logger: logger)
        }
    }
}

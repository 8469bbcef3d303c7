import Hummingbird
import NIOCore

/// The request context of `runner serve`: Hummingbird's core context plus the peer address, which becomes the
/// event's `requestContext.http.sourceIp`.
struct GatewayContext: RequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: SocketAddress?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

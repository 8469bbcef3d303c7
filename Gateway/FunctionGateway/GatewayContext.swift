import Hummingbird
import NIOCore

/// The request context of `gateway serve`: Hummingbird's core context plus the peer address, which becomes the
/// event's `requestContext.http.sourceIp`.
package struct GatewayContext: RequestContext, RemoteAddressRequestContext {
    package var coreContext: CoreRequestContextStorage
    package let remoteAddress: SocketAddress?

    package init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

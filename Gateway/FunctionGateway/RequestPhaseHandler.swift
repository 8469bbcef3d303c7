import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Behind the HTTP decoder: tells the ``ConnectionGuard`` in front of it when a request's head and end have been
/// decoded and when its response has begun and ended, and measures every decoded head against the guard's limits —
/// a head pipelined behind another in one read is never seen by the guard's byte count, so it is counted here, like
/// any other.
///
/// It also keeps a request body from being buffered past its function's limit: a body whose `Content-Length` is over
/// it is dropped as it arrives (the gateway answers 413 from the header alone, with `connection: close`), and a
/// chunked body is passed on only until it has passed the limit by one part (so that the gateway's collection fails
/// with 413), the rest dropped. Passes everything else through unchanged.
final class RequestPhaseHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let limits: HTTPLimits
    private let bodyLimit: GuardedHTTP1Channel.BodyLimit
    private var connectionGuard: ConnectionGuard?
    /// A head was refused: nothing more is passed on.
    private var refused = false
    /// The current request's body limit (`nil`: none here) and the body bytes passed on so far.
    private var body: (limit: Int?, passed: Int) = (nil, 0)
    /// The current request's body is over its limit: its parts are dropped.
    private var discarding = false

    init(limits: HTTPLimits, bodyLimit: @escaping GuardedHTTP1Channel.BodyLimit) {
        self.limits = limits
        self.bodyLimit = bodyLimit
    }

    func handlerAdded(context: ChannelHandlerContext) {
        connectionGuard = try? context.pipeline.syncOperations.handler(type: ConnectionGuard.self)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            connectionGuard?.requestHeadDecoded()
            let (bytes, fields) = Self.size(of: head)
            if bytes > limits.maxHeadBytes || fields > limits.maxHeaderCount {
                refused = true
                connectionGuard?.decodedHeadTooLarge(tooManyFields: fields > limits.maxHeaderCount)
                return
            }
            let path = head.path.map { String($0.prefix { $0 != "?" }) } ?? "/"
            let limit = bodyLimit(head.method.rawValue, path)
            body = (limit, 0)
            let declared = head.headerFields[.contentLength].flatMap(Int.init)
            discarding = limit.map { limit in declared.map { $0 > limit } ?? false } ?? false
        case .body(let part):
            guard !discarding else { return }
            body.passed += part.readableBytes
            if let limit = body.limit, body.passed > limit { discarding = true }
        case .end:
            connectionGuard?.requestEndDecoded()
            guard !discarding else { return }
        }
        context.fireChannelRead(data)
    }

    /// The request line and header fields as they were on the wire (`name: value` lines, CRLFs, the blank line;
    /// optional whitespace aside), and the number of fields (`Host` included).
    static func size(of head: HTTPRequest) -> (bytes: Int, fields: Int) {
        var bytes = head.method.rawValue.utf8.count + 1 + (head.path?.utf8.count ?? 1) + " HTTP/1.1\r\n".utf8.count
        var fields = head.headerFields.count
        if let authority = head.authority {
            bytes += "Host: \r\n".utf8.count + authority.utf8.count
            fields += 1
        }
        for field in head.headerFields {
            bytes += field.name.rawName.utf8.count + field.value.utf8.count + ": \r\n".utf8.count
        }
        return (bytes + 2, fields)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head):
            connectionGuard?.responseHeadWritten(closing: head.headerFields[.connection]?.lowercased() == "close")
        case .body: break
        case .end:
            if let connectionGuard, connectionGuard.responseEndWritten() {
                let written = context.eventLoop.makePromise(of: Void.self)
                let loopBound = NIOLoopBound(connectionGuard, eventLoop: context.eventLoop)
                written.futureResult.whenComplete { _ in loopBound.value.closeAfterWritten() }
                if let promise { written.futureResult.cascade(to: promise) }
                context.write(data, promise: written)
                return
            }
        }
        context.write(data, promise: promise)
    }
}

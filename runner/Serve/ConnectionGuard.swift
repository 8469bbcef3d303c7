import FunctionRuntime
import CaregiverPush
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypes
import Synchronization

/// What the public port allows a client: the limits a host facing the internet needs against slow, oversized or
/// too many connections. Each is answered clearly (a problem response, then the connection is closed) and logged.
struct HTTPLimits: Sendable {
    /// The request line and all header fields together, up to and including the blank line (431 past it).
    var maxHeadBytes = 16 * 1024
    /// Header fields in one request (431 past it).
    var maxHeaderCount = 100
    /// From a request's first byte until its header block is complete (408 past it).
    var headerTimeout: Duration = .seconds(10)
    /// From the end of the header block until the body is complete (408 past it).
    var bodyTimeout: Duration = .seconds(30)
    /// A connection with no request in progress is closed after this long (keep-alive idle, and a client that
    /// connects and sends nothing). Above the 60 s idle timeout of AWS's and Google's load balancers, as a backend's
    /// must be.
    var idleTimeout: Duration = .seconds(75)
    /// Open connections at once; one more is answered 503 and closed.
    var maxConnections = 512
    /// After an error answer, how long unread input is discarded before the socket closes, so that the client reads
    /// the answer instead of a reset.
    var lingerTimeout: Duration = .seconds(2)
}

/// The open connections of one listener.
final class ConnectionCount: Sendable {
    private let value = Atomic<Int>(0)
    /// Counts a new connection; returns how many are open with it.
    func opened() -> Int { value.add(1, ordering: .relaxed).newValue }
    func closed() { value.subtract(1, ordering: .relaxed) }
}

/// Hummingbird's HTTP/1.1 channel with ``ConnectionGuard`` in front of the HTTP decoder and ``RequestPhaseHandler``
/// behind it, so that the guard knows where each request begins and ends.
struct GuardedHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value

    let inner: HTTP1Channel
    let limits: HTTPLimits
    let connections: ConnectionCount
    let logger: Logger

    init(responder: @escaping HTTPChannelHandler.Responder, limits: HTTPLimits, logger: Logger) {
        // NIO's decoder limits stay as a second line behind the guard's (it answers 400 where the guard says 431).
        let decoder = HTTP1Channel.Configuration.DecoderConfiguration(
            maxHeaderFieldSize: limits.maxHeadBytes * 2, maxHeaderListSize: limits.maxHeadBytes * 2,
            maxHeaderFieldCount: limits.maxHeaderCount * 2)
        inner = HTTP1Channel(
            responder: responder,
            configuration: .init(additionalChannelHandlers: [RequestPhaseHandler()], httpDecoderConfiguration: decoder))
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
    static func builder(limits: HTTPLimits, logger: Logger) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in GuardedHTTP1Channel(responder: responder, limits: limits, logger: logger) }
    }
}

/// Sits first in a public connection's pipeline, on raw bytes: counts the connection against the cap, measures each
/// request's header block (size and field count) as it arrives, and keeps the deadlines of ``HTTPLimits``.
///
/// It scans only for line ends, to find where a header block ends; parsing is NIO's. Where a request begins and
/// ends, and when its response has been written, it learns from ``RequestPhaseHandler`` behind the decoder.
final class ConnectionGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum Phase {
        /// No request in progress: the idle deadline runs.
        case idle
        /// A request's header block is arriving.
        case head(bytes: Int, lines: Int, lineLength: Int)
        /// The header block was decoded; the body is arriving.
        case body
        /// The request is complete; its response is pending.
        case waiting
        /// An error answer was written; input is discarded until the socket closes.
        case rejected
    }

    private let limits: HTTPLimits
    private let connections: ConnectionCount
    private let logger: Logger
    private var phase = Phase.idle
    private var counted = false
    /// Requests whose response has not been written completely.
    private var responsesPending = 0
    /// Whether the response to the request being read has begun (then no error answer may be written into it).
    private var responseStarted = false
    private var deadline: Scheduled<Void>?
    private var context: ChannelHandlerContext?

    init(limits: HTTPLimits, connections: ConnectionCount, logger: Logger) {
        self.limits = limits
        self.connections = connections
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { activate(context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        activate(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        if counted {
            counted = false
            connections.closed()
        }
        context.fireChannelInactive()
    }

    private func activate(_ context: ChannelHandlerContext) {
        guard !counted else { return }
        counted = true
        let open = connections.opened()
        if open > limits.maxConnections {
            reject(
                context, status: 503, limit: "max_connections",
                problem: Problem(
                    type: "/problems/unavailable", title: "Service Unavailable", status: 503,
                    detail: "The server has too many open connections. Retry later.", headers: ["retry-after": "1"]))
            return
        }
        arm(limits.idleTimeout, context, .idle)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        switch phase {
        case .rejected:
            return
        case .idle, .waiting:
            // These bytes begin a request.
            phase = .head(bytes: 0, lines: 0, lineLength: 0)
            arm(limits.headerTimeout, context, .head)
        case .head, .body:
            break
        }
        if case .head(var bytes, var lines, var lineLength) = phase {
            for byte in buffer.readableBytesView {
                bytes += 1
                if byte == UInt8(ascii: "\n") {
                    // An empty line ends the header block (a leading empty line before the request line does not).
                    if lineLength == 0 && lines > 0 { break }
                    if lineLength > 0 { lines += 1 }
                    lineLength = 0
                } else if byte != UInt8(ascii: "\r") {
                    lineLength += 1
                }
            }
            phase = .head(bytes: bytes, lines: lines, lineLength: lineLength)
            // `lines` counts the request line too.
            if bytes > limits.maxHeadBytes || lines - 1 > limits.maxHeaderCount {
                let tooMany = lines - 1 > limits.maxHeaderCount
                reject(
                    context, status: 431, limit: tooMany ? "header_count" : "header_size",
                    problem: Problem(
                        type: "/problems/request-header-fields-too-large", title: "Request Header Fields Too Large",
                        status: 431,
                        detail: tooMany
                            ? "The request has more than \(limits.maxHeaderCount) header fields."
                            : "The request line and header fields exceed \(limits.maxHeadBytes) bytes."))
                return
            }
        }
        context.fireChannelRead(data)
    }

    // MARK: Events from the request side (RequestPhaseHandler)

    func requestHeadDecoded() {
        guard case .head = phase else { return }
        phase = .body
        responsesPending += 1
        responseStarted = false
        if let context { arm(limits.bodyTimeout, context, .body) }
    }

    func requestEndDecoded() {
        guard case .body = phase else { return }
        phase = .waiting
        deadline?.cancel()
        deadline = nil
    }

    func responseHeadWritten() {
        responseStarted = true
    }

    func responseEndWritten() {
        responsesPending = max(responsesPending - 1, 0)
        if case .waiting = phase, responsesPending == 0, let context {
            phase = .idle
            arm(limits.idleTimeout, context, .idle)
        }
    }

    // MARK: Deadlines

    private enum Deadline: Sendable { case idle, head, body }

    private func arm(_ after: Duration, _ context: ChannelHandlerContext, _ kind: Deadline) {
        deadline?.cancel()
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: .init(after)) {
            switch kind {
            case .idle: loopBound.value.idleExpired()
            case .head: loopBound.value.headExpired()
            case .body: loopBound.value.bodyExpired()
            }
        }
    }

    private func idleExpired() {
        guard case .idle = phase, responsesPending == 0, let context else { return }
        log("connection closed", limit: "idle_timeout", context)
        context.close(promise: nil)
    }

    private func headExpired() {
        guard case .head = phase else { return }
        requestTimedOut(limit: "header_timeout", what: "The request's header fields", within: limits.headerTimeout)
    }

    private func bodyExpired() {
        guard case .body = phase else { return }
        requestTimedOut(limit: "body_timeout", what: "The request body", within: limits.bodyTimeout)
    }

    /// The 408 of a request that did not arrive in time.
    private func requestTimedOut(limit: String, what: String, within timeout: Duration) {
        guard let context else { return }
        reject(
            context, status: 408, limit: limit,
            problem: Problem(
                type: "/problems/request-timeout", title: "Request Timeout", status: 408,
                detail: "\(what) did not arrive within \(Self.seconds(timeout)) s."))
    }

    /// Answers `problem` (unless a response is already under way on this connection: then it only closes), stops
    /// reading requests, and closes once the client has had time to read the answer.
    private func reject(_ context: ChannelHandlerContext, status: Int, limit: String, problem: Problem) {
        log("request refused", limit: limit, context, status: status)
        let answering: Bool
        switch phase {
        case .body: answering = !responseStarted && responsesPending <= 1
        default: answering = responsesPending == 0
        }
        phase = .rejected
        deadline?.cancel()
        guard answering else {
            context.close(promise: nil)
            return
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let body = (try? encoder.encode(problem)) ?? Data()
        var head = "HTTP/1.1 \(status) \(problem.title)\r\ncontent-type: application/problem+json\r\n"
        for (name, value) in problem.headers.sorted(by: { $0.key < $1.key }) { head += "\(name): \(value)\r\n" }
        head += "cache-control: no-store\r\nconnection: close\r\ncontent-length: \(body.count)\r\n\r\n"
        var buffer = context.channel.allocator.buffer(capacity: head.utf8.count + body.count)
        buffer.writeString(head)
        buffer.writeBytes(body)
        context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        // Half-close: the answer goes out with a FIN; unread input is discarded until the linger deadline.
        context.close(mode: .output, promise: nil)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: .init(limits.lingerTimeout)) {
            loopBound.value.close(promise: nil)
        }
    }

    private func log(_ message: Logger.Message, limit: String, _ context: ChannelHandlerContext, status: Int? = nil) {
        var metadata: Logger.Metadata = ["http.limit": .string(limit)]
        if let status { metadata["http.status"] = .stringConvertible(status) }
        if let address = context.channel.remoteAddress?.ipAddress { metadata["client.address"] = .string(address) }
        logger.info(message, metadata: metadata)
    }

    private static func seconds(_ duration: Duration) -> String {
        let milliseconds = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        return milliseconds % 1000 == 0 ? String(milliseconds / 1000) : String(Double(milliseconds) / 1000)
    }
}

/// Behind the HTTP decoder: tells the ``ConnectionGuard`` in front of it when a request's head and end have been
/// decoded and when its response has begun and ended. Passes everything through unchanged.
final class RequestPhaseHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private var connectionGuard: ConnectionGuard?

    func handlerAdded(context: ChannelHandlerContext) {
        connectionGuard = try? context.pipeline.syncOperations.handler(type: ConnectionGuard.self)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: connectionGuard?.requestHeadDecoded()
        case .body: break
        case .end: connectionGuard?.requestEndDecoded()
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head: connectionGuard?.responseHeadWritten()
        case .body: break
        case .end: connectionGuard?.responseEndWritten()
        }
        context.write(data, promise: promise)
    }
}

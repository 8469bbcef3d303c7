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
    /// Open connections at once from one client address: its share of ``maxConnections``, so that one client
    /// cannot take all of them (one more is answered 503 and closed). Behind a proxy every connection comes from the
    /// proxy's address, so a deployment there sets it as high as ``maxConnections``.
    var maxConnectionsPerClient = 128
    /// After an error answer, how long unread input is discarded before the socket closes, so that the client reads
    /// the answer instead of a reset.
    var lingerTimeout: Duration = .seconds(2)
}

/// The open connections of one listener, in all and per client address.
final class ConnectionCount: Sendable {
    private let value = Atomic<Int>(0)
    private let byClient = Mutex<[String: Int]>([:])

    /// Counts a new connection; returns how many are open with it, in all and from its client's address.
    func opened(client: String) -> (total: Int, fromClient: Int) {
        let total = value.add(1, ordering: .relaxed).newValue
        let fromClient = byClient.withLock { counts in
            counts[client, default: 0] += 1
            return counts[client] ?? 1
        }
        return (total, fromClient)
    }

    func closed(client: String) {
        value.subtract(1, ordering: .relaxed)
        byClient.withLock { counts in
            let left = (counts[client] ?? 1) - 1
            counts[client] = left > 0 ? left : nil
        }
    }
}

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
    /// The client address the connection was counted under, once counted.
    private var counted: String?
    /// The response being written says `connection: close`: once it is out, the connection closes.
    private var closeAfterResponse = false
    /// The answer to a refused pipelined request, written once the responses before it are out.
    private var deferredAnswer: (status: Int, problem: Problem)?
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
        if let client = counted {
            counted = nil
            connections.closed(client: client)
        }
        context.fireChannelInactive()
    }

    private func activate(_ context: ChannelHandlerContext) {
        guard counted == nil else { return }
        let client = context.channel.remoteAddress?.ipAddress ?? "unknown"
        counted = client
        let open = connections.opened(client: client)
        if open.total > limits.maxConnections || open.fromClient > limits.maxConnectionsPerClient {
            let perClient = open.total <= limits.maxConnections
            reject(
                context, status: 503, limit: perClient ? "max_connections_per_client" : "max_connections",
                problem: Problem(
                    type: "/problems/unavailable", title: "Service Unavailable", status: 503,
                    detail: perClient
                        ? "This client has too many open connections. Retry later."
                        : "The server has too many open connections. Retry later.",
                    headers: ["retry-after": "1"]))
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
                refuseHead(context, tooManyFields: lines - 1 > limits.maxHeaderCount)
                return
            }
        }
        context.fireChannelRead(data)
    }

    private func refuseHead(_ context: ChannelHandlerContext, tooManyFields: Bool, afterPending: Bool = false) {
        reject(
            context, status: 431, limit: tooManyFields ? "header_count" : "header_size",
            problem: Problem(
                type: "/problems/request-header-fields-too-large", title: "Request Header Fields Too Large",
                status: 431,
                detail: tooManyFields
                    ? "The request has more than \(limits.maxHeaderCount) header fields."
                    : "The request line and header fields exceed \(limits.maxHeadBytes) bytes."),
            afterPending: afterPending)
    }

    // MARK: Events from the request side (RequestPhaseHandler)

    /// A request head came out of the decoder — the one whose bytes were being measured, or one pipelined behind
    /// it in the same read (those are measured by ``RequestPhaseHandler`` on the decoded head).
    func requestHeadDecoded() {
        responsesPending += 1
        switch phase {
        case .head, .waiting:
            phase = .body
            responseStarted = responsesPending > 1 ? responseStarted : false
            if let context { arm(limits.bodyTimeout, context, .body) }
        case .idle, .body, .rejected:
            break
        }
    }

    /// A decoded head over the limits (a pipelined one the byte count did not see): answered like any other.
    func decodedHeadTooLarge(tooManyFields: Bool) {
        guard let context else { return }
        responsesPending = max(responsesPending - 1, 0)
        refuseHead(context, tooManyFields: tooManyFields, afterPending: true)
    }

    func requestEndDecoded() {
        guard case .body = phase else { return }
        phase = .waiting
        deadline?.cancel()
        deadline = nil
    }

    /// - Parameter closing: the response says `connection: close` (the gateway's 413): from now on the rest of the
    ///   request is discarded unread, and the connection closes once the response is out.
    func responseHeadWritten(closing: Bool) {
        responseStarted = true
        if closing {
            closeAfterResponse = true
            phase = .rejected
            deadline?.cancel()
        }
    }

    /// - Returns: whether the connection is to close once this response's last byte is written
    ///   (``closeAfterWritten()``).
    func responseEndWritten() -> Bool {
        responsesPending = max(responsesPending - 1, 0)
        if closeAfterResponse { return true }
        if case .waiting = phase, responsesPending == 0, let context {
            phase = .idle
            arm(limits.idleTimeout, context, .idle)
        }
        return false
    }

    /// The `connection: close` response is out: half-close, discard what the client still sends, close at the
    /// linger deadline.
    func closeAfterWritten() {
        guard let context else { return }
        if responsesPending > 0 { return }
        if let (status, problem) = deferredAnswer {
            deferredAnswer = nil
            answer(context, status: status, problem: problem)
        } else {
            lingerAndClose(context)
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
    ///
    /// - Parameter afterPending: the refused request is pipelined behind others still being answered: its answer
    ///   waits for theirs (``closeAfterWritten()`` writes it), instead of cutting them off.
    private func reject(
        _ context: ChannelHandlerContext, status: Int, limit: String, problem: Problem, afterPending: Bool = false
    ) {
        log("request refused", limit: limit, context, status: status)
        let answering: Bool
        switch phase {
        case _ where afterPending: answering = responsesPending == 0
        case .body: answering = !responseStarted && responsesPending <= 1
        default: answering = responsesPending == 0
        }
        phase = .rejected
        deadline?.cancel()
        guard answering else {
            if afterPending && responsesPending > 0 {
                deferredAnswer = (status, problem)
                closeAfterResponse = true
            } else {
                context.close(promise: nil)
            }
            return
        }
        answer(context, status: status, problem: problem)
    }

    /// Writes `problem` as the connection's last response, then half-closes.
    private func answer(_ context: ChannelHandlerContext, status: Int, problem: Problem) {
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
        lingerAndClose(context)
    }

    /// Half-close: the answer goes out with a FIN; unread input is discarded until the linger deadline.
    private func lingerAndClose(_ context: ChannelHandlerContext) {
        phase = .rejected
        context.close(mode: .output, promise: nil)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        deadline?.cancel()
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

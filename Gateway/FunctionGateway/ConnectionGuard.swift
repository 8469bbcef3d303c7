import Codecs
import FunctionRuntime
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypes
import Synchronization

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
                problem: .tooManyConnections(perClient: perClient))
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
            problem: .headerFieldsTooLarge(
                tooManyFields
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
            problem: .requestTimeout("\(what) did not arrive within \(Self.seconds(timeout)) s."))
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
        // A refused head (or a head that never came) with earlier requests still being answered: their responses
        // go out first, then this answer, then the close — cutting them off would lose an answer the client is
        // owed (a dose stored, never confirmed, and retried).
        var deferrable = afterPending
        switch phase {
        case _ where afterPending: answering = responsesPending == 0
        case .body: answering = !responseStarted && responsesPending <= 1
        default:
            answering = responsesPending == 0
            deferrable = true
        }
        phase = .rejected
        deadline?.cancel()
        guard answering else {
            if deferrable && responsesPending > 0 {
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
        let body = JSONCoding.encode(problem) ?? []
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

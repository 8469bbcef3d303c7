import Codecs
import OpenSSLCrypto
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle
import Synchronization

/// The AWS Lambda Runtime API, served to warm workers at `/<secret>/2018-06-01/runtime/…` on a listener of its own
/// (127.0.0.1, an ephemeral port, never the public one). `<secret>` is the worker's own unguessable token
/// (``WorkerDirectory``): a path with any other first segment is a 404, like every other unknown path.
///
/// A channel handler on NIO's HTTP/1 codec rather than a router: each warm invocation makes two requests here (the
/// next event, the answer), in a fixed shape, from a client of our own — docs/decisions.md#runtime-api-listener.
/// What a request may cost is bounded before its secret is known: the head by NIO's decoder limits, and a request
/// whose path or secret is not a worker's is answered 404 at its head and its connection closed, its body unread.
struct RuntimeAPIServer: Service {
    /// The largest answer a worker may post, as Lambda's 6 MB response limit.
    static let responseLimit = 6 * 1024 * 1024

    let workers: WorkerDirectory
    /// Called with the bound port once the listener accepts connections, or with `nil` when it cannot listen.
    let onBound: @Sendable (Int?) -> Void

    func run() async throws {
        let workers = workers
        var limits = NIOHTTPDecoderLimitConfiguration()
        limits.maxHeaderFieldCount = 64
        limits.maxHeaderListSize = 16 * 1024
        limits.maxHeaderFieldSize = 16 * 1024
        let decoderLimits = limits
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                        withEncoderConfiguration: .init(), withDecoderLimitConfiguration: decoderLimits)
                    try channel.pipeline.syncOperations.addHandler(RuntimeAPIHandler(workers: workers))
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
        } catch {
            onBound(nil)
            throw error
        }
        onBound(channel.localAddress?.port ?? 0)
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                try? await channel.closeFuture.get()
            } onGracefulShutdown: {
                channel.close(promise: nil)
            }
        } onCancel: {
            channel.close(promise: nil)
        }
    }
}

/// One connection of the Runtime API listener: each request is read whole, routed by its path, answered by the
/// worker's pool, and written back on the connection's event loop.
final class RuntimeAPIHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private enum Route {
        case next
        case response(String)
        case error(String)
        case initError
    }

    /// What the request in progress asks.
    private var request: (route: Route, pool: WarmPool, worker: Int, head: HTTPRequestHead)?
    /// A stranger's request was answered: nothing more is read from the connection.
    private var closing = false
    private var keepAlive = true
    private var body: ByteBuffer?
    private var bodyTooLarge = false
    private let workers: WorkerDirectory

    init(workers: WorkerDirectory) {
        self.workers = workers
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            body = nil
            bodyTooLarge = false
            guard let (route, pool, worker) = Self.route(head, workers) else {
                closing = true
                keepAlive = false
                write(.status(.notFound, "not found"), context: context)
                return
            }
            keepAlive = head.isKeepAlive
            request = (route, pool, worker, head)
            // curl asks before a large body, and waits a second for an answer that does not come.
            if head.headers.first(name: "expect")?.lowercased() == "100-continue" {
                let proceed = HTTPResponseHead(version: head.version, status: .continue)
                context.writeAndFlush(wrapOutboundOut(.head(proceed)), promise: nil)
            }
        case .body(var chunk):
            guard let request, case .response = request.route else { return }
            if bodyTooLarge { return }
            if (body?.readableBytes ?? 0) + chunk.readableBytes > RuntimeAPIServer.responseLimit {
                bodyTooLarge = true
                body = nil
            } else if body == nil {
                body = chunk
            } else {
                body?.writeBuffer(&chunk)
            }
        case .end:
            guard let (route, pool, worker, head) = request else { return }
            request = nil
            let posted = body.map { Array(buffer: $0) } ?? []
            body = nil
            answer(route: route, pool: pool, worker: worker, head: head, posted: posted, context: context)
        }
    }

    /// A head NIO's decoder refused (answered 400 by its error handler) or a broken connection: it ends here.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    private func answer(
        route: Route, pool: WarmPool, worker: Int, head: HTTPRequestHead, posted: [UInt8],
        context: ChannelHandlerContext
    ) {
        let errorType = head.headers.first(name: "Lambda-Runtime-Function-Error-Type") ?? "Unhandled"
        let tooLarge = bodyTooLarge
        let work: @Sendable () async -> Answer
        switch route {
        case .next:
            work = {
                guard let event = await pool.next(worker: worker) else {
                    return .status(.serviceUnavailable, "the gateway is shutting down")
                }
                return .event(event, function: pool.function.name)
            }
        case .response(let id) where tooLarge:
            work = {
                // Lambda's answer to a response past its limit: the invocation fails, the runtime is told 413.
                _ = await pool.fail(id, worker: worker, errorType: "Function.ResponseSizeTooLarge")
                return .status(.payloadTooLarge, "the response is larger than 6 MB")
            }
        case .response(let id):
            work = {
                await pool.respond(id, worker: worker, body: posted)
                    ? .status(.accepted, "OK") : .status(.badRequest, "unknown request id")
            }
        case .error(let id):
            work = {
                await pool.fail(id, worker: worker, errorType: errorType)
                    ? .status(.accepted, "OK") : .status(.badRequest, "unknown request id")
            }
        case .initError:
            work = {
                await pool.initFailed(worker: worker, errorType: errorType)
                return .status(.accepted, "OK")
            }
        }
        context.eventLoop.makeFutureWithTask(work).assumeIsolated().whenSuccess { answer in
            self.write(answer, context: context)
        }
    }

    /// The route, the pool and the worker a request's method and path name; `nil` when they name no route (`GET` for
    /// the next event, `POST` for the rest) or no live worker.
    private static func route(_ head: HTTPRequestHead, _ workers: WorkerDirectory) -> (
        route: Route, pool: WarmPool, worker: Int
    )? {
        let path = head.uri.utf8.firstIndex(of: UInt8(ascii: "?")).map { head.uri[..<$0] } ?? head.uri[...]
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count >= 6, parts[0].isEmpty, parts[2] == "2018-06-01", parts[3] == "runtime" else { return nil }
        let route: Route
        switch (head.method, parts.count, parts[4]) {
        case (.GET, 6, "invocation") where parts[5] == "next": route = .next
        case (.POST, 7, "invocation") where parts[6] == "response" && !parts[5].isEmpty:
            route = .response(String(parts[5]))
        case (.POST, 7, "invocation") where parts[6] == "error" && !parts[5].isEmpty: route = .error(String(parts[5]))
        case (.POST, 6, "init") where parts[5] == "error": route = .initError
        default: return nil
        }
        guard let (pool, worker) = workers.worker(secret: String(parts[1])) else { return nil }
        return (route, pool, worker)
    }

    /// What a request is answered.
    private enum Answer: Sendable {
        case status(HTTPResponseStatus, String)
        case event(WarmPool.Event, function: String)
    }

    private func write(_ answer: Answer, context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/json")
        let status: HTTPResponseStatus
        let body: ByteBuffer
        switch answer {
        case .status(let code, let message):
            status = code
            body = ByteBuffer(string: #"{"status":"\#(message)"}"#)
        case .event(let event, let function):
            status = .ok
            headers.add(name: "Lambda-Runtime-Aws-Request-Id", value: event.awsRequestID)
            headers.add(name: "Lambda-Runtime-Deadline-Ms", value: String(event.deadlineMilliseconds))
            headers.add(
                name: "Lambda-Runtime-Invoked-Function-Arn",
                value: "arn:aws:lambda:local:000000000000:function:\(function)")
            headers.add(name: "Lambda-Runtime-Trace-Id", value: "Root=1-\(event.clientRequestID)")
            body = ByteBuffer(bytes: event.body)
        }
        headers.add(name: "content-length", value: String(body.readableBytes))
        if !keepAlive { headers.add(name: "connection", value: "close") }
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        if keepAlive {
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        } else {
            context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
        }
    }
}

/// The secrets in the warm workers' `AWS_LAMBDA_RUNTIME_API` paths, and whose each is. A secret is 192 random bits,
/// made when its worker starts and forgotten when it exits; only that worker (and its host) knows it.
final class WorkerDirectory: Sendable {
    private let entries = Mutex<[String: (pool: WarmPool, worker: Int)]>([:])

    /// A new secret for `worker` of `pool`.
    func register(pool: WarmPool, worker: Int) throws -> String {
        let secret = Base64URL.encode(try SecureRandom.bytes(24))
        entries.withLock { $0[secret] = (pool, worker) }
        return secret
    }

    func remove(secret: String) {
        _ = entries.withLock { $0.removeValue(forKey: secret) }
    }

    func worker(secret: String) -> (WarmPool, Int)? {
        entries.withLock { $0[secret] }.map { ($0.pool, $0.worker) }
    }
}

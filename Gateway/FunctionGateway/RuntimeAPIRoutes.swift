import Codecs
import OpenSSLCrypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

/// The AWS Lambda Runtime API, served to warm workers at `/<secret>/2018-06-01/runtime/…` on a listener of its own
/// (127.0.0.1, an ephemeral port, never the public one). `<secret>` is the worker's own unguessable token
/// (``WorkerDirectory``): a path with any other first segment is a 404, like every other unknown path.
enum RuntimeAPIRoutes {
    static func add(to router: Router<GatewayContext>, workers: WorkerDirectory) {
        let prefix = "/{secret}/2018-06-01/runtime"
        router.get("\(prefix)/invocation/next") { _, context -> Response in
            guard let (pool, worker) = locate(context, workers) else { return status(.notFound, "not found") }
            guard let event = await pool.next(worker: worker) else {
                return status(.serviceUnavailable, "the gateway is shutting down")
            }
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            headers[HTTPField.Name("Lambda-Runtime-Aws-Request-Id")!] = event.awsRequestID
            headers[HTTPField.Name("Lambda-Runtime-Deadline-Ms")!] = String(event.deadlineMilliseconds)
            headers[HTTPField.Name("Lambda-Runtime-Invoked-Function-Arn")!] =
                "arn:aws:lambda:local:000000000000:function:\(pool.function.name)"
            headers[HTTPField.Name("Lambda-Runtime-Trace-Id")!] = "Root=1-\(event.clientRequestID)"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: event.body)))
        }
        router.post("\(prefix)/invocation/{id}/response") { request, context -> Response in
            guard let (pool, worker) = locate(context, workers), let id = context.parameters.get("id") else {
                return status(.notFound, "not found")
            }
            var request = request
            let body = Array(buffer: try await request.collectBody(upTo: 6 * 1024 * 1024))
            return await pool.respond(id, worker: worker, body: body)
                ? status(.accepted, "OK") : status(.badRequest, "unknown request id")
        }
        router.post("\(prefix)/invocation/{id}/error") { request, context -> Response in
            guard let (pool, worker) = locate(context, workers), let id = context.parameters.get("id") else {
                return status(.notFound, "not found")
            }
            let type = request.headers[HTTPField.Name("Lambda-Runtime-Function-Error-Type")!] ?? "Unhandled"
            return await pool.fail(id, worker: worker, errorType: type)
                ? status(.accepted, "OK") : status(.badRequest, "unknown request id")
        }
        router.post("\(prefix)/init/error") { request, context -> Response in
            guard let (pool, worker) = locate(context, workers) else { return status(.notFound, "not found") }
            let type = request.headers[HTTPField.Name("Lambda-Runtime-Function-Error-Type")!] ?? "Unhandled"
            await pool.initFailed(worker: worker, errorType: type)
            return status(.accepted, "OK")
        }
    }

    private static func locate(_ context: GatewayContext, _ workers: WorkerDirectory) -> (WarmPool, Int)? {
        guard let secret = context.parameters.get("secret") else { return nil }
        return workers.worker(secret: secret)
    }

    private static func status(_ status: HTTPResponse.Status, _ message: String) -> Response {
        let body = #"{"status":"\#(message)"}"#
        return Response(
            status: status, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: body)))
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

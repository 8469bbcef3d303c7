import CaregiverPush
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The AWS Lambda Runtime API, served to warm workers at `/<function>/<worker>/2018-06-01/runtime/…`.
enum RuntimeAPIRoutes {
    static func add(to router: Router<GatewayContext>, pools: @escaping @Sendable () -> [String: WarmPool]) {
        let prefix = "/{function}/{worker}/2018-06-01/runtime"
        router.get("\(prefix)/invocation/next") { _, context -> Response in
            guard let (pool, worker) = locate(context, pools()) else { return status(.notFound, "unknown function or worker") }
            guard let event = await pool.next(worker: worker) else {
                return status(.serviceUnavailable, "the runner is shutting down")
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
            guard let (pool, _) = locate(context, pools()), let id = context.parameters.get("id") else {
                return status(.notFound, "unknown function or worker")
            }
            var request = request
            let body = Array(buffer: try await request.collectBody(upTo: 6 * 1024 * 1024))
            return await pool.respond(id, body: body) ? status(.accepted, "OK") : status(.badRequest, "unknown request id")
        }
        router.post("\(prefix)/invocation/{id}/error") { request, context -> Response in
            guard let (pool, _) = locate(context, pools()), let id = context.parameters.get("id") else {
                return status(.notFound, "unknown function or worker")
            }
            let type = request.headers[HTTPField.Name("Lambda-Runtime-Function-Error-Type")!] ?? "Unhandled"
            return await pool.fail(id, errorType: type) ? status(.accepted, "OK") : status(.badRequest, "unknown request id")
        }
        router.post("\(prefix)/init/error") { request, context -> Response in
            guard let (pool, worker) = locate(context, pools()) else { return status(.notFound, "unknown function or worker") }
            let type = request.headers[HTTPField.Name("Lambda-Runtime-Function-Error-Type")!] ?? "Unhandled"
            await pool.initFailed(worker: worker, errorType: type)
            return status(.accepted, "OK")
        }
    }

    private static func locate(_ context: GatewayContext, _ pools: [String: WarmPool]) -> (WarmPool, Int)? {
        guard let name = context.parameters.get("function"), let pool = pools[name],
            let worker = context.parameters.get("worker").flatMap(Int.init)
        else { return nil }
        return (pool, worker)
    }

    private static func status(_ status: HTTPResponse.Status, _ message: String) -> Response {
        let body = #"{"status":"\#(message)"}"#
        return Response(
            status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}

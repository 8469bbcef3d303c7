import Codecs
import JOSE
import FunctionRuntime
import CaregiverPush
import Foundation
import TestFixtures
import Logging
import Synchronization
import Testing

/// The environment the functions get in tests.
package func testEnvironment(_ overrides: [String: String?] = [:]) -> [String: String] {
    var environment = [
        "DATABASE_URL": TestDatabase.runtimeURL,
        "SUPABASE_JWT_SECRET": testJWTSecret,
        "PUSH_ENVIRONMENT": "DEV",
    ]
    environment.merge(FixedInstant.runShift) { _, shifted in shifted }
    for (key, value) in overrides { environment[key] = value }
    return environment
}

/// An API Gateway 2.0 event for a POST with a JSON body.
package func makeEvent(
    path: String = "/", bearer: String?, body: String?, contentType: String? = "application/json",
    method: String = "POST", extraHeaders: [String: String] = [:], base64: Bool = false
) -> Data {
    var headers = extraHeaders
    if let bearer { headers["authorization"] = "Bearer \(bearer)" }
    if let contentType { headers["content-type"] = contentType }
    let event = APIGatewayV2Request(
        routeKey: "\(method) \(path)", rawPath: path, headers: headers,
        requestContext: .init(
            requestId: UUID().uuidString.lowercased(), routeKey: "\(method) \(path)",
            timeEpoch: Int64(Date().timeIntervalSince1970 * 1000),
            http: .init(method: method, path: path, sourceIp: "127.0.0.1", userAgent: "tests")),
        body: base64 ? body.map { Data($0.utf8).base64EncodedString() } : body, isBase64Encoded: base64)
    return (try? JSONEncoder().encode(event)) ?? Data()
}

/// Log lines captured from the real JSON formatter.
package final class CapturedLog: Sendable {
    private let lines = Mutex<[String]>([])

    package init() {}

    package var text: String { lines.withLock { $0.joined() } }

    package func logger(function: String) -> Logger {
        var logger = Logger(label: function) { label in
            var handler = JSONLogHandler(label: label) { [self] line in self.lines.withLock { $0.append(line) } }
            handler.logLevel = .debug
            return handler
        }
        logger[metadataKey: "function"] = .string(function)
        return logger
    }
}

/// The result of one in-process invocation.
package struct Invocation {
    package let response: APIGatewayV2Response
    package let log: String

    package var status: Int { response.statusCode }
    package var json: JSONValue? { try? JSONValue.parse(response.body) }
}

/// Invokes an endpoint in-process through the same ``EndpointHandler`` the executables use; `now` is the
/// invocation's clock, as a host hands it over (the wall clock unless a test fixes the instant).
package func invoke(
    _ endpoint: some Endpoint, event: Data, environment: [String: String] = testEnvironment(), now: Date = Date()
) -> Invocation {
    do {
        return try invokeInProcess(endpoint, event: event, environment: environment, now: now)
    } catch {
        Issue.record("\(error)")
        return Invocation(response: .problem(.internalError(), requestID: "none"), log: "")
    }
}

/// ``invoke(_:event:environment:)`` with hooks on the invocation's database session: `prepare` runs before the event
/// is handed over, `inspect` when the response arrives (before the endpoint's post-response work).
///
/// The host's writer here keeps the response in memory; the endpoint then goes on with its post-response work
/// (the push), and this returns when the invocation is over. A second response is dropped by the writer, which logs
/// it.
package func invokeInProcess(
    _ endpoint: some Endpoint, event: Data, environment: [String: String] = testEnvironment(), now: Date = Date(),
    prepare: (DatabaseSession) throws -> Void = { _ in },
    inspect: @escaping (DatabaseSession) throws -> Void = { _ in }
) throws -> Invocation {
    _ = TestDatabase.migrated
    let captured = CapturedLog()
    let configuration = Configuration(environment: environment)
    let service = CaregiverService(
        configuration: configuration, logger: captured.logger(function: endpoint.functionName))
    let handler = EndpointHandler(endpoint, service: service)
    let database = service.database
    defer { database.close() }
    try prepare(database)
    var inspected: Result<Void, any Error> = .success(())
    let writer = ResponseWriter<APIGatewayV2Response>.inMemory(logger: service.logger) { _ in
        inspected = Result { try inspect(database) }
    }
    handler.handle(InvocationInput(eventBytes: Array(event), now: now), writer: writer)
    try inspected.get()
    guard let response = writer.response else {
        throw InvocationError("\(endpoint.functionName) did not respond")
    }
    LeakCapture.record(response.body, source: "\(endpoint.functionName) response")
    LeakCapture.record(captured.text, source: "\(endpoint.functionName) log")
    return Invocation(response: response, log: captured.text)
}

/// An in-process invocation that did not answer exactly once.
package struct InvocationError: Error, CustomStringConvertible {
    package let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// The `errors` of a validation problem, as field → message.
package func fieldErrors(_ invocation: Invocation) -> [String: String] {
    var result: [String: String] = [:]
    for error in invocation.json?["errors"]?.arrayValue ?? [] {
        if let field = error["field"]?.stringValue, let message = error["message"]?.stringValue {
            result[field] = message
        }
    }
    return result
}

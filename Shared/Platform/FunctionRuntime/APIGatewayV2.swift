import Codecs
import FoundationEssentials

/// The AWS API Gateway HTTP API payload format 2.0 event: what a function reads on stdin (or receives from the
/// Lambda Runtime API). Only `body`, `headers`, `isBase64Encoded` and `requestContext` matter to the functions;
/// everything is optional so that a hand-written fixture with just those still works.
public struct APIGatewayV2Request: Codable, Sendable {
    public struct RequestContext: Codable, Sendable {
        public struct HTTP: Codable, Sendable {
            public var method: String?
            public var path: String?
            public var `protocol`: String?
            public var sourceIp: String?
            public var userAgent: String?

            public init(method: String? = nil, path: String? = nil, sourceIp: String? = nil, userAgent: String? = nil) {
                self.method = method
                self.path = path
                self.protocol = "HTTP/1.1"
                self.sourceIp = sourceIp
                self.userAgent = userAgent
            }
        }

        public var accountId: String?
        public var apiId: String?
        public var domainName: String?
        public var domainPrefix: String?
        public var requestId: String?
        public var routeKey: String?
        public var stage: String?
        public var time: String?
        public var timeEpoch: Int64?
        public var http: HTTP?

        public init(requestId: String? = nil, routeKey: String? = nil, timeEpoch: Int64? = nil, http: HTTP? = nil) {
            self.requestId = requestId
            self.routeKey = routeKey
            self.timeEpoch = timeEpoch
            self.http = http
            self.stage = "$default"
        }
    }

    public var version: String?
    public var routeKey: String?
    public var rawPath: String?
    public var rawQueryString: String?
    public var cookies: [String]?
    /// Header names are lower-case in format 2.0; ``headerValue(_:)`` does not rely on it.
    public var headers: [String: String]?
    public var queryStringParameters: [String: String]?
    public var pathParameters: [String: String]?
    public var requestContext: RequestContext?
    public var body: String?
    public var isBase64Encoded: Bool?

    public init(
        routeKey: String? = nil, rawPath: String? = nil, headers: [String: String]? = nil,
        requestContext: RequestContext? = nil, body: String? = nil, isBase64Encoded: Bool? = false
    ) {
        self.version = "2.0"
        self.routeKey = routeKey
        self.rawPath = rawPath
        self.rawQueryString = ""
        self.headers = headers
        self.requestContext = requestContext
        self.body = body
        self.isBase64Encoded = isBase64Encoded
    }

    /// The value of a header, looked up without regard to letter case.
    public func headerValue(_ name: String) -> String? {
        guard let headers else { return nil }
        let lowered = name.lowercased()
        if let value = headers[lowered] { return value }
        return headers.first { $0.key.lowercased() == lowered }?.value
    }
}

/// What a function writes on stdout: the format 2.0 response.
public struct APIGatewayV2Response: Codable, Sendable, Equatable {
    public var statusCode: Int
    public var headers: [String: String]
    public var body: String
    public var isBase64Encoded: Bool

    public init(statusCode: Int, headers: [String: String], body: String, isBase64Encoded: Bool = false) {
        self.statusCode = statusCode
        self.headers = headers
        self.body = body
        self.isBase64Encoded = isBase64Encoded
    }
}

/// Why an invocation event was refused (a 400): it is not one strict JSON document of the 2.0 shape.
public enum EventError: Error, Equatable, Sendable {
    /// Not one well-formed JSON document (a duplicate member name included).
    case malformed(JSONParseError.Reason)
    /// A member of the wrong type (`headers` not an object of strings, `body` not a string, …).
    case wrongType(member: String)
    /// `headers` holds one name more than once in different letter case (API Gateway never sends that).
    case ambiguousHeader

    public var detail: String {
        switch self {
        case .malformed(.duplicateMember): "The invocation event names a member more than once."
        case .malformed: "The invocation event is not valid JSON."
        case .wrongType: "The invocation event is not an API Gateway HTTP API 2.0 event."
        case .ambiguousHeader:
            "The invocation event's headers hold one name more than once in different letter case."
        }
    }
}

extension APIGatewayV2Request {
    /// Reads an event as strictly as a body or a JWT: one JSON document without duplicate member names, each known
    /// member of its type (`null` counts as absent, as for `JSONDecoder`), unknown members ignored, and header names
    /// unique regardless of letter case — two spellings of `Authorization` could otherwise be read differently by
    /// two components, so the event is refused rather than one of them chosen.
    /// - Throws: ``EventError``.
    public init(parsing bytes: [UInt8]) throws(EventError) {
        let document: JSONValue
        do {
            document = try JSONValue.parse(bytes, maxDepth: 64)
        } catch {
            throw .malformed(error.reason)
        }
        guard let event = document.objectValue else { throw .wrongType(member: "event") }
        self.init()
        version = try Self.string(event, "version")
        routeKey = try Self.string(event, "routeKey")
        rawPath = try Self.string(event, "rawPath")
        rawQueryString = try Self.string(event, "rawQueryString")
        cookies = try Self.strings(event, "cookies")
        headers = try Self.stringMap(event, "headers")
        queryStringParameters = try Self.stringMap(event, "queryStringParameters")
        pathParameters = try Self.stringMap(event, "pathParameters")
        body = try Self.string(event, "body")
        isBase64Encoded = try Self.bool(event, "isBase64Encoded")
        requestContext = try Self.object(event, "requestContext").map { context throws(EventError) in
            var result = RequestContext()
            result.accountId = try Self.string(context, "accountId")
            result.apiId = try Self.string(context, "apiId")
            result.domainName = try Self.string(context, "domainName")
            result.requestId = try Self.string(context, "requestId")
            result.routeKey = try Self.string(context, "routeKey")
            result.stage = try Self.string(context, "stage")
            result.time = try Self.string(context, "time")
            result.timeEpoch = try Self.integer(context, "timeEpoch")
            result.http = try Self.object(context, "http").map { http throws(EventError) in
                var result = RequestContext.HTTP()
                result.method = try Self.string(http, "method")
                result.path = try Self.string(http, "path")
                result.protocol = try Self.string(http, "protocol")
                result.sourceIp = try Self.string(http, "sourceIp")
                result.userAgent = try Self.string(http, "userAgent")
                return result
            }
            return result
        }
        if let headers {
            var seen = Set<String>()
            for name in headers.keys where !seen.insert(name.lowercased()).inserted { throw .ambiguousHeader }
        }
    }

    private static func present(_ object: [String: JSONValue], _ name: String) -> JSONValue? {
        guard let value = object[name], value != .null else { return nil }
        return value
    }

    private static func string(_ object: [String: JSONValue], _ name: String) throws(EventError) -> String? {
        guard let value = present(object, name) else { return nil }
        guard let string = value.stringValue else { throw .wrongType(member: name) }
        return string
    }

    private static func bool(_ object: [String: JSONValue], _ name: String) throws(EventError) -> Bool? {
        guard let value = present(object, name) else { return nil }
        guard let bool = value.boolValue else { throw .wrongType(member: name) }
        return bool
    }

    private static func integer(_ object: [String: JSONValue], _ name: String) throws(EventError) -> Int64? {
        guard let value = present(object, name) else { return nil }
        guard let integer = value.integerValue else { throw .wrongType(member: name) }
        return integer
    }

    private static func object(_ object: [String: JSONValue], _ name: String) throws(EventError) -> [String: JSONValue]?
    {
        guard let value = present(object, name) else { return nil }
        guard let members = value.objectValue else { throw .wrongType(member: name) }
        return members
    }

    private static func strings(_ object: [String: JSONValue], _ name: String) throws(EventError) -> [String]? {
        guard let value = present(object, name) else { return nil }
        guard let array = value.arrayValue else { throw .wrongType(member: name) }
        var strings: [String] = []
        for element in array {
            guard let string = element.stringValue else { throw .wrongType(member: name) }
            strings.append(string)
        }
        return strings
    }

    private static func stringMap(_ object: [String: JSONValue], _ name: String) throws(EventError) -> [String: String]?
    {
        guard let members = try Self.object(object, name) else { return nil }
        var map: [String: String] = [:]
        for (key, value) in members {
            guard let string = value.stringValue else { throw .wrongType(member: name) }
            map[key] = string
        }
        return map
    }
}

extension APIGatewayV2Response {
    /// An `application/problem+json` response for `problem`, with its own headers (`Retry-After`, `Allow`, …).
    public static func problem(_ problem: Problem, requestID: String) -> APIGatewayV2Response {
        var headers = problem.headers
        headers["content-type"] = "application/problem+json"
        headers["x-request-id"] = requestID
        headers["cache-control"] = "no-store"
        return APIGatewayV2Response(statusCode: problem.status, headers: headers, body: JSONCoding.string(problem))
    }

    /// A JSON response: a ``JSONSerializable`` body written directly, any other through the encoder.
    /// - Throws: when `body` cannot be encoded.
    public static func json(status: Int, body: any Encodable, requestID: String) throws -> APIGatewayV2Response {
        let bytes: [UInt8]
        if let direct = body as? any JSONSerializable, let written = direct.jsonValue.serialized {
            bytes = written
        } else {
            bytes = Array(try JSONCoding.encoder().encode(body))
        }
        return APIGatewayV2Response(
            statusCode: status,
            headers: ["content-type": "application/json", "x-request-id": requestID, "cache-control": "no-store"],
            body: String(decoding: bytes, as: UTF8.self))
    }
}

/// The part of the event an endpoint reads, already checked: the method is the route's, the body is decoded from
/// base64 when it was, and is within the size limit.
public struct FunctionRequest: Sendable {
    public let method: String
    public let path: String
    public let requestID: String
    public let body: [UInt8]
    private let event: APIGatewayV2Request

    /// Checks an API Gateway event against the route and unwraps its body.
    /// - Parameters:
    ///   - event: the parsed event.
    ///   - method: the one method the route accepts.
    ///   - requestID: the invocation's request id (``requestID(of:fallback:)``).
    ///   - bodyLimit: the largest body accepted, after base64 decoding.
    /// - Throws: ``Problem`` 405 for another method, 413 for a body over the limit, 400 for bad base64.
    public init(event: APIGatewayV2Request, method: String, requestID: String, bodyLimit: Int) throws(Problem) {
        let actual = (event.requestContext?.http?.method ?? method).uppercased()
        guard actual == method else { throw Problem.methodNotAllowed(allow: method) }
        var body: [UInt8] = []
        if let text = event.body {
            if event.isBase64Encoded == true {
                // Reject before decoding what cannot fit: base64 grows by 4/3.
                guard text.utf8.count <= (bodyLimit / 3 + 1) * 4 + 4 else {
                    throw Problem.payloadTooLarge(limit: bodyLimit)
                }
                guard let decoded = Data(base64Encoded: text) else {
                    throw Problem.badRequest("The body is marked base64 but is not valid base64.")
                }
                body = Array(decoded)
            } else {
                body = Array(text.utf8)
            }
        }
        guard body.count <= bodyLimit else { throw Problem.payloadTooLarge(limit: bodyLimit) }
        self.event = event
        self.method = actual
        self.path = event.rawPath ?? event.requestContext?.http?.path ?? "/"
        self.requestID = requestID
        self.body = body
    }

    /// A header's value, looked up without regard to letter case.
    public func header(_ name: String) -> String? { event.headerValue(name) }

    /// The event's request id (API Gateway's, else an `x-request-id` header), else the host's, else a new UUID.
    public static func requestID(of event: APIGatewayV2Request, fallback: String?) -> String {
        let candidates = [event.requestContext?.requestId, event.headerValue("x-request-id"), fallback]
        for case let candidate? in candidates where isPrintableID(candidate) { return candidate }
        return UUID.random().lowercasedText
    }

    /// A request id is echoed into headers and logs: keep it short and printable.
    public static func isPrintableID(_ value: String) -> Bool {
        !value.isEmpty && value.utf8.count <= 128
            && value.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
    }
}

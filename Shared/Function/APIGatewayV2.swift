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

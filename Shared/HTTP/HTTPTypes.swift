/// An outgoing HTTP request (to FCM, to Google's token endpoint, to the Lambda Runtime API).
public struct HTTPRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// Responses larger than this abort the transfer (FCM answers are a few hundred bytes).
    public var responseBodyLimit: Int

    public init(
        method: String = "GET", url: String, headers: [(name: String, value: String)] = [], body: [UInt8] = [],
        responseBodyLimit: Int = 1024 * 1024
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.responseBodyLimit = responseBodyLimit
    }
}

/// A received response; header names are lower-case.
public struct HTTPResponse: Sendable {
    public let status: Int
    public let headers: [String: String]
    public let body: [UInt8]

    public init(status: Int, headers: [String: String], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// A transfer that produced no HTTP response. Never carries URLs, headers or bodies in its description.
public struct HTTPClientError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        case setupFailed, connectionFailed, timedOut, transferFailed, responseTooLarge, deadlineExceeded
    }

    public let kind: Kind
    /// libcurl's `CURLcode`, when it reported one.
    public let curlCode: Int?

    public init(_ kind: Kind, curlCode: Int? = nil) {
        self.kind = kind
        self.curlCode = curlCode
    }

    /// Timeouts and broken connections may succeed when tried again.
    public var isTransient: Bool {
        kind == .connectionFailed || kind == .timedOut || kind == .transferFailed
    }

    public var description: String {
        curlCode.map { "\(kind.rawValue) (curl \($0))" } ?? kind.rawValue
    }
}

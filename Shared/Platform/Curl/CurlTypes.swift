/// An outgoing HTTP request (to FCM, to Google's token endpoint, to the Lambda Runtime API).
public struct CurlRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// Responses larger than this abort the transfer (FCM answers are a few hundred bytes), unless
    /// ``discardsOversizedBody``.
    public var responseBodyLimit: Int
    /// Past ``responseBodyLimit``, read the rest of the body without keeping it and answer with an empty body and
    /// ``CurlResponse/bodyExceededLimit`` set, instead of failing: the Runtime API's next event, whose request id
    /// (a header) is needed to answer an event too large to take.
    public var discardsOversizedBody = false
    /// The certificate authorities a TLS peer must chain to: the process's (``TrustStore/process``) unless a caller
    /// names others (a test talking to its own emulator). Verification itself cannot be turned off.
    public var trust: TrustStore

    public init(
        method: String = "GET", url: String, headers: [(name: String, value: String)] = [], body: [UInt8] = [],
        responseBodyLimit: Int = 1024 * 1024, trust: TrustStore = .process
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.responseBodyLimit = responseBodyLimit
        self.trust = trust
    }
}

extension CurlRequest {
    /// Where the request goes as a connection sees it (`https://host:port`): transfers of one origin share
    /// connections.
    var origin: Substring {
        let scheme = url.hasPrefix("https://") ? 8 : url.hasPrefix("http://") ? 7 : 0
        let rest = url.dropFirst(scheme)
        return url[..<(rest.firstIndex(of: "/") ?? url.endIndex)]
    }

    /// Over TLS, where the server offers HTTP/2 by ALPN (as FCM does), the request is one stream of a shared
    /// connection; plain HTTP is HTTP/1.1 here, one request per connection at a time.
    var multiplexes: Bool { url.hasPrefix("https://") }
}

/// A received response; header names are lower-case.
public struct CurlResponse: Sendable {
    public let status: Int
    public let headers: [String: String]
    public let body: [UInt8]
    /// The body was larger than the request's limit and was discarded (``CurlRequest/discardsOversizedBody``).
    public let bodyExceededLimit: Bool

    public init(status: Int, headers: [String: String], body: [UInt8], bodyExceededLimit: Bool = false) {
        self.status = status
        self.headers = headers
        self.body = body
        self.bodyExceededLimit = bodyExceededLimit
    }
}

/// A transfer that produced no HTTP response. Never carries URLs, headers or bodies in its description.
public struct CurlError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        case setupFailed, connectionFailed, timedOut, transferFailed, responseTooLarge, deadlineExceeded
        /// The deadline came while the request was still waiting to start (a back-off, a throttle): never sent.
        case notStarted
        /// The peer's certificate did not chain to a trusted authority, or did not name the host.
        case tlsVerificationFailed
        /// libcurl (loaded on the first request) could not be loaded or initialised: nothing was sent.
        case libraryUnavailable
    }

    public let kind: Kind
    /// libcurl's `CURLcode`, when it reported one.
    public let curlCode: Int?
    /// libcurl's own sentence for a TLS failure ("SSL certificate problem: unable to get local issuer certificate",
    /// "no alternative certificate subject name matches target host name '…'"): names a host at most, never a
    /// header, body or credential. For `libraryUnavailable`, the loader's: it names the library, or the dependency
    /// or symbol it lacks.
    public let detail: String?

    public init(_ kind: Kind, curlCode: Int? = nil, detail: String? = nil) {
        self.kind = kind
        self.curlCode = curlCode
        self.detail = detail
    }

    /// Timeouts and broken connections may succeed when tried again, and so may a certificate that does not verify
    /// or a library that does not load: the fix (a trust bundle, a renewed certificate, a fixed deployment) arrives
    /// without the message changing.
    public var isTransient: Bool {
        kind == .connectionFailed || kind == .timedOut || kind == .transferFailed || kind == .tlsVerificationFailed
            || kind == .libraryUnavailable
    }

    /// The connection the request was on broke before the answer (libcurl: a failed send or receive, nothing
    /// received, an HTTP/2 framing or stream error), as opposed to no connection at all (refused, unresolved, the TLS
    /// handshake): the server is there, and a fresh connection is the usual cure.
    public var isBrokenConnection: Bool {
        guard kind == .connectionFailed, let curlCode else { return false }
        return Self.brokenConnectionCodes.contains(curlCode)
    }

    /// `CURLE_HTTP2` (16), `CURLE_GOT_NOTHING` (52), `CURLE_SEND_ERROR` (55), `CURLE_RECV_ERROR` (56),
    /// `CURLE_HTTP2_STREAM` (92).
    static let brokenConnectionCodes: Set<Int> = [16, 52, 55, 56, 92]

    public var description: String {
        var text = curlCode.map { "\(kind.rawValue) (curl \($0))" } ?? kind.rawValue
        if let detail { text += ": \(detail)" }
        return text
    }
}

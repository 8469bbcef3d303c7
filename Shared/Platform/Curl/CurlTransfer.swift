import CCurl
import FoundationEssentials

/// One HTTP request as libcurl performs it: owns the `CURL` easy handle, its header list and the buffer the
/// response is written into. Part of the thin libcurl binding; nothing outside `Shared/Platform/Curl` sees a pointer.
final class CurlTransfer {
    /// Collects what libcurl hands the write and header callbacks. Reached from C through an unretained pointer,
    /// so the transfer keeps it alive for as long as the easy handle exists.
    final class Sink {
        var body: [UInt8] = []
        var headerLines: [String] = []
        let bodyLimit: Int
        let discardsOversizedBody: Bool
        /// Set once the body passed the limit with ``discardsOversizedBody``: the rest is read and dropped.
        var exceededLimit = false

        init(bodyLimit: Int, discardsOversizedBody: Bool) {
            self.bodyLimit = bodyLimit
            self.discardsOversizedBody = discardsOversizedBody
        }
    }

    let handle: UnsafeMutableRawPointer
    let tag: Int
    /// Asked for a connection of its own (see ``init(request:tag:timeoutMilliseconds:opensConnection:)``).
    let opensConnection: Bool
    /// `https://`: the connection is up once the TLS handshake is done.
    let isTLS: Bool
    /// The origin ``CurlClient`` counts it under, and whether its own connection has been counted as up.
    var origin = ""
    var connectionCounted = false
    private let sink: Sink
    private var headerList: UnsafeMutablePointer<curl_slist>?
    /// `CURLOPT_ERRORBUFFER`: libcurl's sentence for a failure, read for TLS failures only.
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
    private var released = false

    /// Prepares (but does not start) a transfer, loading libcurl if nothing has yet.
    /// - Throws: ``CurlError`` when libcurl cannot be loaded or refuses the handle or an option.
    /// - Parameters:
    ///   - opensConnection: a new connection for this transfer, whatever the pool holds (`FRESH_CONNECT`): how
    ///     ``CurlClient`` opens exactly the HTTP/2 connections a batch needs.
    init(request: CurlRequest, tag: Int, timeoutMilliseconds: Int, opensConnection: Bool = false) throws(CurlError) {
        try CurlLibrary.load()
        guard let handle = ccurl_easy_init() else { throw CurlError(.setupFailed) }
        self.handle = handle
        self.tag = tag
        self.opensConnection = opensConnection
        self.isTLS = request.multiplexes
        self.sink = Sink(
            bodyLimit: request.responseBodyLimit, discardsOversizedBody: request.discardsOversizedBody)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        do {
            try configure(request, timeoutMilliseconds: timeoutMilliseconds)
        } catch {
            release()
            throw error
        }
    }

    deinit {
        release()
    }

    /// Cleans the handle up before
    /// the header list and the error buffer it may point at are freed. Once: an initializer that throws after every
    /// property is set releases here, and its instance's `deinit` then runs too.
    private func release() {
        guard !released else { return }
        released = true
        ccurl_easy_cleanup(handle)
        ccurl_slist_free_all(headerList)
        errorBuffer.deallocate()
    }

    private func configure(_ request: CurlRequest, timeoutMilliseconds: Int) throws(CurlError) {
        try check(ccurl_easy_setopt_string(handle, CURLOPT_URL, request.url))
        try check(ccurl_easy_setopt_long(handle, CURLOPT_NOSIGNAL, 1))
        try check(ccurl_easy_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0))
        try check(ccurl_easy_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, Int(min(timeoutMilliseconds, 3000))))
        try check(ccurl_easy_setopt_long(handle, CURLOPT_TIMEOUT_MS, Int(max(timeoutMilliseconds, 1))))
        // HTTP/2 over TLS when the server offers it (one connection, many streams), HTTP/1.1 otherwise.
        try check(ccurl_easy_setopt_long(handle, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS)))
        // Over TLS (FCM), wait for a connection that can multiplex rather than opening one per stream. Plain HTTP
        // never negotiates HTTP/2 here, and waiting would only serialise the first round trip.
        if request.url.hasPrefix("https://") {
            try check(ccurl_easy_setopt_long(handle, CURLOPT_PIPEWAIT, 1))
        }
        if opensConnection { try check(ccurl_easy_setopt_long(handle, CURLOPT_FRESH_CONNECT, 1)) }
        try check(ccurl_easy_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https"))
        try configureTrust(request.trust)
        try check(ccurl_easy_setopt_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer))
        if request.method == "GET" {
            try check(ccurl_easy_setopt_long(handle, CURLOPT_HTTPGET, 1))
        } else if request.method != "POST" && request.body.isEmpty {
            try check(ccurl_easy_setopt_string(handle, CURLOPT_CUSTOMREQUEST, request.method))
        } else {
            // POST, and PUT or any other method with a body (a CloudFormation response URL): the body goes as-is.
            try check(ccurl_easy_setopt_long(handle, CURLOPT_POSTFIELDSIZE, request.body.count))
            // libcurl copies the body, so nothing here has to outlive this call.
            let copied = request.body.withUnsafeBufferPointer { buffer in
                ccurl_easy_setopt_pointer(
                    handle, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: buffer.baseAddress))
            }
            try check(copied)
            if request.method != "POST" {
                try check(ccurl_easy_setopt_string(handle, CURLOPT_CUSTOMREQUEST, request.method))
            }
        }
        // "Expect: 100-continue" would cost a round trip on every POST.
        // "Name;" is libcurl's way to send a header with an empty value ("Name:" would remove it): a pre-signed S3
        // URL expects `Content-Type:` empty, which stops libcurl's form-encoded default for a body.
        let lines = request.headers.map { $0.value.isEmpty ? "\($0.name);" : "\($0.name): \($0.value)" }
        for line in lines + ["Expect:"] {
            guard let appended = ccurl_slist_append(headerList, line) else { throw CurlError(.setupFailed) }
            headerList = appended
        }
        try check(ccurl_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, headerList))
        let context = Unmanaged.passUnretained(sink).toOpaque()
        try check(ccurl_easy_setopt_write_function(handle, CURLOPT_WRITEFUNCTION, curlWriteBody))
        try check(ccurl_easy_setopt_pointer(handle, CURLOPT_WRITEDATA, context))
        try check(ccurl_easy_setopt_write_function(handle, CURLOPT_HEADERFUNCTION, curlWriteHeader))
        try check(ccurl_easy_setopt_pointer(handle, CURLOPT_HEADERDATA, context))
    }

    /// Peer and host-name verification on (libcurl's defaults, set anyway so that no build can differ), anchored
    /// in the request's trust store.
    private func configureTrust(_ trust: TrustStore) throws(CurlError) {
        try check(ccurl_easy_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 1))
        try check(ccurl_easy_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 2))
        if let file = trust.caFile { try check(ccurl_easy_setopt_string(handle, CURLOPT_CAINFO, file)) }
        if let directory = trust.caDirectory {
            try check(ccurl_easy_setopt_string(handle, CURLOPT_CAPATH, directory))
        } else if trust.excludesDefaultDirectory {
            try check(ccurl_easy_setopt_pointer(handle, CURLOPT_CAPATH, nil))
        }
    }

    private func check(_ code: CURLcode) throws(CurlError) {
        guard code == CURLE_OK else { throw CurlError(.setupFailed, curlCode: Int(code.rawValue)) }
    }

    /// The outcome once libcurl reports the transfer done with `code`.
    func result(code: CURLcode) -> Result<CurlResponse, CurlError> {
        guard code == CURLE_OK else {
            switch code {
            case CURLE_OPERATION_TIMEDOUT:
                return .failure(CurlError(.timedOut, curlCode: Int(code.rawValue)))
            case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR,
                CURLE_SSL_PINNEDPUBKEYNOTMATCH:
                let detail = String(cString: errorBuffer)
                return .failure(
                    CurlError(
                        .tlsVerificationFailed, curlCode: Int(code.rawValue), detail: detail.isEmpty ? nil : detail))
            case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY,
                CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_SSL_CONNECT_ERROR,
                CURLE_PARTIAL_FILE, CURLE_HTTP2, CURLE_HTTP2_STREAM:
                return .failure(CurlError(.connectionFailed, curlCode: Int(code.rawValue)))
            case CURLE_WRITE_ERROR:
                return .failure(CurlError(.responseTooLarge, curlCode: Int(code.rawValue)))
            default:
                return .failure(CurlError(.transferFailed, curlCode: Int(code.rawValue)))
            }
        }
        var status = 0
        _ = ccurl_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return .success(
            CurlResponse(
                status: status, headers: Self.parseHeaders(sink.headerLines), body: sink.body,
                bodyExceededLimit: sink.exceededLimit))
    }

    /// Whether its connection is up: TCP connected and, over TLS, the handshake (and so ALPN) done.
    var isConnected: Bool {
        var microseconds: curl_off_t = 0
        let info = isTLS ? CURLINFO_APPCONNECT_TIME_T : CURLINFO_CONNECT_TIME_T
        _ = ccurl_easy_getinfo_offset(handle, info, &microseconds)
        return microseconds > 0
    }

    /// The HTTP version of its response: 2 for an HTTP/2 stream, 1 for HTTP/1.x, 0 before a response.
    var responseHTTPVersion: Int {
        var version = 0
        _ = ccurl_easy_getinfo_long(handle, CURLINFO_HTTP_VERSION, &version)
        switch version {
        case Int(CURL_HTTP_VERSION_2_0): return 2
        case Int(CURL_HTTP_VERSION_1_0), Int(CURL_HTTP_VERSION_1_1): return 1
        default: return version == 0 ? 0 : 3
        }
    }

    /// How many new connections this transfer opened (0 when it reused one).
    var connectionsOpened: Int {
        var count = 0
        _ = ccurl_easy_getinfo_long(handle, CURLINFO_NUM_CONNECTS, &count)
        return count
    }

    /// The headers of the last response (a 100-continue or a redirect may precede it), names lower-cased, values
    /// without the spaces, tabs and line ends around them. Read byte by byte (every response of a fan-out passes
    /// here): a name is ASCII, and only ASCII whitespace is optional around a value (RFC 9110's OWS).
    static func parseHeaders(_ lines: [String]) -> [String: String] {
        var headers: [String: String] = [:]
        for line in lines {
            let bytes = line.utf8
            if bytes.starts(with: "HTTP/".utf8) {
                headers = [:]
                continue
            }
            guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let name = String(decoding: bytes[..<colon].map(lowercasedASCII), as: UTF8.self)
            var start = bytes.index(after: colon)
            var end = bytes.endIndex
            while start < end, isOptionalWhitespace(bytes[start]) { start = bytes.index(after: start) }
            while end > start, isOptionalWhitespace(bytes[bytes.index(before: end)]) { end = bytes.index(before: end) }
            let value = String(line[start..<end])
            headers[name] = headers[name].map { "\($0), \(value)" } ?? value
        }
        return headers
    }

    private static func lowercasedASCII(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }

    private static func isOptionalWhitespace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\r")
            || byte == UInt8(ascii: "\n")
    }
}

/// `CURLOPT_WRITEFUNCTION`: appends body bytes; refusing (returning 0) past the limit aborts the transfer.
private let curlWriteBody: ccurl_write_callback = { data, size, count, context in
    guard let data, let context else { return 0 }
    let sink = Unmanaged<CurlTransfer.Sink>.fromOpaque(context).takeUnretainedValue()
    let length = size * count
    guard !sink.exceededLimit else { return length }
    guard sink.body.count + length <= sink.bodyLimit else {
        guard sink.discardsOversizedBody else { return 0 }
        sink.exceededLimit = true
        sink.body = []
        return length
    }
    data.withMemoryRebound(to: UInt8.self, capacity: length) {
        sink.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: length))
    }
    return length
}

/// `CURLOPT_HEADERFUNCTION`: one header line per call.
private let curlWriteHeader: ccurl_write_callback = { data, size, count, context in
    guard let data, let context else { return 0 }
    let sink = Unmanaged<CurlTransfer.Sink>.fromOpaque(context).takeUnretainedValue()
    let length = size * count
    let line = data.withMemoryRebound(to: UInt8.self, capacity: length) {
        String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
    }
    if sink.headerLines.count < 200 { sink.headerLines.append(line) }
    return length
}

/// libcurl is not linked: the first client or transfer of the process loads it (`dlopen`, in CCurl) and runs
/// `curl_global_init`, once. A process that makes no HTTP request never maps libcurl or its dependencies.
enum CurlLibrary {
    /// `nil` once libcurl is loaded and initialised; otherwise why not, for every request of the process.
    private static let failure: CurlError? = {
        guard ccurl_load() == 0 else {
            let reason = ccurl_load_error().map { String(cString: $0) } ?? "unknown reason"
            return CurlError(.libraryUnavailable, detail: "cannot load \(CCURL_LIBRARY): \(reason)")
        }
        let code = ccurl_global_init(Int(CURL_GLOBAL_DEFAULT))
        guard code == CURLE_OK else {
            return CurlError(
                .libraryUnavailable, curlCode: Int(code.rawValue), detail: "\(CCURL_LIBRARY): curl_global_init failed")
        }
        return nil
    }()

    /// Loads libcurl on the first call.
    /// - Throws: ``CurlError`` of kind `libraryUnavailable` when libcurl cannot be loaded or initialised.
    static func load() throws(CurlError) {
        if let failure { throw failure }
    }
}

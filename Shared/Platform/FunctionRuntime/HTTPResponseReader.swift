import Codecs

/// An HTTP/1.1 response as ``RuntimeAPIConnection`` receives it; header names are lower-case (the last of a repeated
/// header wins).
public struct RuntimeAPIResponse: Sendable {
    public let status: Int
    public let headers: [String: String]
    public let body: [UInt8]
    /// The body was larger than the request's limit and was read to its end and dropped (the request allowed it).
    public let bodyExceededLimit: Bool
}

/// A request to the Runtime API that produced no response. Its description never carries a path, a header or a body.
public struct RuntimeAPIError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// No connection: the address does not resolve, or nothing accepts it.
        case connectionFailed
        /// The connection broke (reset, closed) before the whole response arrived.
        case connectionLost
        case timedOut
        /// What arrived is not an HTTP/1.1 response this client reads.
        case malformedResponse
        /// The body passed the request's limit (and the request did not allow reading past it).
        case responseTooLarge
    }

    public let kind: Kind

    public init(_ kind: Kind) {
        self.kind = kind
    }

    public var description: String { kind.rawValue }
}

/// Reads one HTTP/1.1 response from a byte stream: the head (status line and headers, at most
/// ``headLimit`` bytes), then the body by `Content-Length`, by `Transfer-Encoding: chunked` (chunk extensions and
/// trailers read and dropped), or, with neither, to the end of the connection. Interim (1xx) responses are skipped.
/// No I/O of its own: `more` appends what the connection received to the buffer it is given and says whether
/// anything came (`false`: the peer closed). Work and memory are bounded by the limits, whatever the peer sends.
struct HTTPResponseReader {
    /// The status line and headers together (AWS's Runtime API sends a few hundred bytes).
    static let headLimit = 64 * 1024
    /// A chunk-size line, its extensions included.
    static let chunkLineLimit = 1024

    /// Received and not yet consumed: `buffer[position...]`.
    private(set) var buffer: [UInt8] = []
    private var position = 0
    private let more: (inout [UInt8]) throws(RuntimeAPIError) -> Bool

    init(more: @escaping (inout [UInt8]) throws(RuntimeAPIError) -> Bool) {
        self.more = more
    }

    /// What the reader holds beyond the response it read: bytes a server should not have sent.
    var hasLeftover: Bool { position < buffer.count }

    /// Reads one response.
    /// - Returns: the response, and whether the connection may carry the next request (HTTP/1.1 without
    ///   `Connection: close`, and a body that was delimited).
    mutating func read(bodyLimit: Int, discardsOversizedBody: Bool) throws(RuntimeAPIError) -> (
        response: RuntimeAPIResponse, keepAlive: Bool
    ) {
        var head = try readHead()
        while (100..<200).contains(head.status) {
            head = try readHead()
        }
        let framing = try Self.framing(of: head.headers, status: head.status)
        var keepAlive = head.minorVersion >= 1 && !Self.tokens(head.headers["connection"]).contains("close")
        var body = BodySink(limit: bodyLimit, discards: discardsOversizedBody)
        switch framing {
        case .none:
            break
        case .length(let length):
            try readExactly(length, into: &body)
        case .chunked:
            try readChunked(into: &body)
        case .toEnd:
            keepAlive = false
            try readToEnd(into: &body)
        }
        let response = RuntimeAPIResponse(
            status: head.status, headers: head.headers, body: body.bytes, bodyExceededLimit: body.exceeded)
        return (response, keepAlive)
    }

    private enum Framing: Equatable {
        case none, length(Int), chunked, toEnd
    }

    private static func framing(of headers: [String: String], status: Int) throws(RuntimeAPIError) -> Framing {
        if status == 204 || status == 304 { return .none }
        if let encoding = headers["transfer-encoding"] {
            // Only `chunked` as the last (here: the only) coding is a body this client can delimit.
            guard tokens(encoding) == ["chunked"] else { throw RuntimeAPIError(.malformedResponse) }
            return .chunked
        }
        if let text = headers["content-length"] {
            guard let length = decimal(text.utf8[...]) else { throw RuntimeAPIError(.malformedResponse) }
            return .length(length)
        }
        return .toEnd
    }

    /// A header's comma-separated tokens, trimmed and lower-cased.
    private static func tokens(_ value: String?) -> [String] {
        guard let value else { return [] }
        return value.split(separator: ",").map { String($0.trimmingOptionalWhitespace()).lowercased() }
    }

    /// A non-negative decimal of at most 15 digits (no sign, no spaces), or nil.
    private static func decimal(_ digits: Substring.UTF8View.SubSequence) -> Int? {
        guard !digits.isEmpty, digits.count <= 15 else { return nil }
        var value = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value
    }

    private struct Head {
        var minorVersion: Int
        var status: Int
        var headers: [String: String]
    }

    /// Reads up to the blank line that ends a head and parses it.
    private mutating func readHead() throws(RuntimeAPIError) -> Head {
        let end = try readUntil(terminator: [13, 10, 13, 10], limit: Self.headLimit)
        let lines = buffer[position..<end].split(separator: 10, omittingEmptySubsequences: false)
        position = end + 4
        guard let statusLine = lines.first else { throw RuntimeAPIError(.malformedResponse) }
        let head = try Self.statusLine(statusLine)
        var headers: [String: String] = [:]
        for raw in lines.dropFirst() {
            let line = raw.last == 13 ? raw.dropLast() : raw
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex else {
                throw RuntimeAPIError(.malformedResponse)
            }
            let name = String(decoding: line[..<colon], as: UTF8.self)
            // A name is a token: no spaces before the colon (RFC 9112 §5.1), nothing a header could be smuggled in.
            guard name.utf8.allSatisfy({ $0 > 32 && $0 < 127 }) else { throw RuntimeAPIError(.malformedResponse) }
            let value = line[line.index(after: colon)...].drop { $0 == 32 || $0 == 9 }
            let end = value.lastIndex { $0 != 32 && $0 != 9 }.map { value.index(after: $0) } ?? value.startIndex
            headers[name.lowercased()] = String(decoding: value[..<end], as: UTF8.self)
        }
        return Head(minorVersion: head.minorVersion, status: head.status, headers: headers)
    }

    /// `HTTP/1.x SSS reason`.
    private static func statusLine(_ raw: ArraySlice<UInt8>) throws(RuntimeAPIError) -> (
        minorVersion: Int, status: Int
    ) {
        let line = raw.last == 13 ? raw.dropLast() : raw
        let prefix = Array("HTTP/1.".utf8)
        guard line.count >= 12, line.starts(with: prefix) else { throw RuntimeAPIError(.malformedResponse) }
        let base = line.startIndex
        let minor = line[base + 7]
        let status = line[(base + 9)..<(base + 12)]
        guard minor == UInt8(ascii: "0") || minor == UInt8(ascii: "1"), line[base + 8] == UInt8(ascii: " "),
            line.count == 12 || line[base + 12] == UInt8(ascii: " "),
            status.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { throw RuntimeAPIError(.malformedResponse) }
        let code = status.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        guard code >= 100 else { throw RuntimeAPIError(.malformedResponse) }
        return (Int(minor - UInt8(ascii: "0")), code)
    }

    /// Where the bytes of a body go: kept up to the limit; past it, dropped (when allowed) or refused.
    private struct BodySink {
        var bytes: [UInt8] = []
        var exceeded = false
        let limit: Int
        let discards: Bool

        mutating func append(_ part: ArraySlice<UInt8>) throws(RuntimeAPIError) {
            if exceeded { return }
            guard bytes.count + part.count > limit else {
                bytes.append(contentsOf: part)
                return
            }
            guard discards else { throw RuntimeAPIError(.responseTooLarge) }
            exceeded = true
            bytes = []
        }
    }

    private mutating func readExactly(_ count: Int, into body: inout BodySink) throws(RuntimeAPIError) {
        var left = count
        while left > 0 {
            if position == buffer.count {
                try receive()
            }
            let take = min(left, buffer.count - position)
            try body.append(buffer[position..<(position + take)])
            position += take
            left -= take
            compact()
        }
    }

    private mutating func readToEnd(into body: inout BodySink) throws(RuntimeAPIError) {
        while true {
            try body.append(buffer[position...])
            position = buffer.count
            compact()
            guard try more(&buffer) else { return }
        }
    }

    private mutating func readChunked(into body: inout BodySink) throws(RuntimeAPIError) {
        while true {
            let end = try readUntil(terminator: [13, 10], limit: Self.chunkLineLimit)
            var sizeText = buffer[position..<end]
            if let semicolon = sizeText.firstIndex(of: UInt8(ascii: ";")) { sizeText = sizeText[..<semicolon] }
            position = end + 2
            guard let size = Self.hexadecimal(sizeText) else { throw RuntimeAPIError(.malformedResponse) }
            if size == 0 { break }
            try readExactly(size, into: &body)
            let crlf = try readUntil(terminator: [13, 10], limit: 2)
            guard crlf == position else { throw RuntimeAPIError(.malformedResponse) }
            position += 2
        }
        // Trailers, each dropped, up to the blank line.
        var trailerBytes = 0
        while true {
            let end = try readUntil(terminator: [13, 10], limit: Self.headLimit)
            trailerBytes += end - position + 2
            let isBlank = end == position
            position = end + 2
            if isBlank { return }
            guard trailerBytes <= Self.headLimit else { throw RuntimeAPIError(.malformedResponse) }
        }
    }

    /// Hexadecimal digits (at most 15; spaces and tabs around them allowed), or nil.
    private static func hexadecimal(_ raw: ArraySlice<UInt8>) -> Int? {
        let digits = raw.drop { $0 == 32 || $0 == 9 }.reversed().drop { $0 == 32 || $0 == 9 }.reversed()
        guard !digits.isEmpty, digits.count <= 15 else { return nil }
        var value = 0
        for byte in digits {
            let digit: Int
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = Int(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = Int(byte - UInt8(ascii: "a")) + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = Int(byte - UInt8(ascii: "A")) + 10
            default: return nil
            }
            value = value * 16 + digit
        }
        return value
    }

    /// Receives until `terminator` follows the position, at most `limit` bytes ahead of it; returns the index where
    /// the terminator starts.
    private mutating func readUntil(terminator: [UInt8], limit: Int) throws(RuntimeAPIError) -> Int {
        var searchFrom = position
        while true {
            if let found = Self.find(terminator, in: buffer, from: searchFrom) {
                guard found - position <= limit else { throw RuntimeAPIError(.malformedResponse) }
                return found
            }
            guard buffer.count - position <= limit + terminator.count else {
                throw RuntimeAPIError(.malformedResponse)
            }
            searchFrom = max(position, buffer.count - terminator.count + 1)
            try receive()
        }
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard haystack.count >= needle.count, start <= haystack.count - needle.count else { return nil }
        var index = start
        let last = haystack.count - needle.count
        while index <= last {
            if haystack[index] == needle[0] {
                var matched = 1
                while matched < needle.count, haystack[index + matched] == needle[matched] { matched += 1 }
                if matched == needle.count { return index }
            }
            index += 1
        }
        return nil
    }

    /// Receives more, or throws: the peer closed before the response ended.
    private mutating func receive() throws(RuntimeAPIError) {
        guard try more(&buffer) else { throw RuntimeAPIError(.connectionLost) }
    }

    /// Drops what was consumed once it is most of the buffer, so that a large body does not keep its bytes twice.
    private mutating func compact() {
        if position == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            position = 0
        }
    }
}

import Testing

@testable import FunctionRuntime

/// How the Runtime API's client reads a response (``HTTPResponseReader``), fed from memory in pieces of a chosen
/// size, as a socket may deliver them: framing by length, by chunks and by the end of the connection; what it keeps
/// and drops past a limit; and what it refuses, within its bounds, whatever a peer sends.
@Suite("the Runtime API client's HTTP/1.1 reader")
struct HTTPResponseReaderTests {
    /// A reader over `bytes`, handed out `piece` bytes at a time, then the end of the connection; and a count of the
    /// bytes it asked for.
    final class Stream {
        let bytes: [UInt8]
        let piece: Int
        var offset = 0

        init(_ text: String, piece: Int = 1 << 20) {
            bytes = Array(text.utf8)
            self.piece = piece
        }

        init(bytes: [UInt8], piece: Int = 1 << 20) {
            self.bytes = bytes
            self.piece = piece
        }

        func reader() -> HTTPResponseReader {
            HTTPResponseReader { (buffer: inout [UInt8]) throws(RuntimeAPIError) -> Bool in
                guard self.offset < self.bytes.count else { return false }
                let end = min(self.bytes.count, self.offset + self.piece)
                buffer.append(contentsOf: self.bytes[self.offset..<end])
                self.offset = end
                return true
            }
        }
    }

    static func read(
        _ text: String, piece: Int = 1 << 20, limit: Int = 1 << 20, discards: Bool = false
    ) throws(RuntimeAPIError) -> (response: RuntimeAPIResponse, keepAlive: Bool) {
        var reader = Stream(text, piece: piece).reader()
        return try reader.read(bodyLimit: limit, discardsOversizedBody: discards)
    }

    static func failure(_ text: String, piece: Int = 1 << 20, limit: Int = 1 << 20) -> RuntimeAPIError.Kind? {
        do {
            _ = try read(text, piece: piece, limit: limit)
            return nil
        } catch {
            return error.kind
        }
    }

    static let next = """
        HTTP/1.1 200 OK\r
        Content-Type: application/json\r
        Lambda-Runtime-Aws-Request-Id:   8476a536-e9f4-11e8-9739-2dfe598c3fcd \t\r
        Lambda-Runtime-Deadline-Ms: 1542409706888\r
        Content-Length: 13\r
        \r
        {"hello":"x"}
        """

    @Test("a Runtime API answer by Content-Length, whole or a byte at a time: status, lower-case names, trimmed values")
    func contentLength() throws {
        for piece in [1, 2, 7, 1 << 20] {
            let (response, keepAlive) = try Self.read(Self.next, piece: piece)
            #expect(response.status == 200)
            #expect(String(decoding: response.body, as: UTF8.self) == #"{"hello":"x"}"#)
            #expect(response.headers["lambda-runtime-aws-request-id"] == "8476a536-e9f4-11e8-9739-2dfe598c3fcd")
            #expect(response.headers["lambda-runtime-deadline-ms"] == "1542409706888")
            #expect(response.headers["Content-Type"] == nil)
            #expect(!response.bodyExceededLimit)
            #expect(keepAlive)
        }
    }

    @Test("a chunked body (as Go's net/http sends one it did not measure): extensions and trailers dropped")
    func chunked() throws {
        let text =
            "HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "5;name=value\r\n{\"a\":\r\n" + "A\r\n\"0123456\"}\r\n" + "0\r\nX-Trailer: t\r\n\r\n"
        for piece in [1, 3, 1 << 20] {
            let (response, keepAlive) = try Self.read(text, piece: piece)
            #expect(response.status == 202)
            #expect(String(decoding: response.body, as: UTF8.self) == #"{"a":"0123456"}"#)
            #expect(keepAlive)
        }
        // The last chunk without the blank line after it is a response cut short.
        #expect(Self.failure("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n") == .connectionLost)
        // A chunk not followed by CRLF, or a size that is not hexadecimal, is not HTTP.
        #expect(
            Self.failure("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy\r\n0\r\n\r\n")
                == .malformedResponse)
        #expect(
            Self.failure("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nz\r\nx\r\n0\r\n\r\n")
                == .malformedResponse)
        // Any other coding is one this client cannot delimit.
        #expect(
            Self.failure("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n") == .malformedResponse)
    }

    @Test("the connection is kept unless the answer says close, is HTTP/1.0, or is delimited by the connection's end")
    func keepAlive() throws {
        #expect(try Self.read("HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n").keepAlive)
        #expect(
            try !Self.read("HTTP/1.1 202 Accepted\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n")
                .keepAlive)
        #expect(try !Self.read("HTTP/1.0 202 Accepted\r\nContent-Length: 0\r\n\r\n").keepAlive)
        let toEnd = try Self.read("HTTP/1.1 200 OK\r\n\r\nall of it", piece: 2)
        #expect(!toEnd.keepAlive)
        #expect(String(decoding: toEnd.response.body, as: UTF8.self) == "all of it")
        // No body for a 204 whatever follows; an interim 100 is skipped.
        #expect(try Self.read("HTTP/1.1 204 No Content\r\n\r\n").response.body.isEmpty)
        let interim = try Self.read("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\nok")
        #expect(interim.response.status == 202)
        #expect(interim.response.body == Array("ok".utf8))
    }

    @Test("past the limit: the body is read to its end and dropped when allowed, the next answer intact; else refused")
    func limit() throws {
        let big = String(repeating: "e", count: 100)
        let two =
            "HTTP/1.1 200 OK\r\nLambda-Runtime-Aws-Request-Id: one\r\nContent-Length: 100\r\n\r\n\(big)"
            + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
        for piece in [1, 9, 1 << 20] {
            var reader = Stream(two, piece: piece).reader()
            let first = try reader.read(bodyLimit: 50, discardsOversizedBody: true)
            #expect(first.response.bodyExceededLimit)
            #expect(first.response.body.isEmpty)
            #expect(first.response.headers["lambda-runtime-aws-request-id"] == "one")
            let second = try reader.read(bodyLimit: 50, discardsOversizedBody: true)
            #expect(second.response.body == Array("{}".utf8))
            #expect(!second.response.bodyExceededLimit)
        }
        #expect(Self.failure("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n\(big)", limit: 50) == .responseTooLarge)
        // Chunked bodies are held to the same limit.
        let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n64\r\n\(big)\r\n0\r\n\r\n"
        #expect(Self.failure(chunked, limit: 50) == .responseTooLarge)
        #expect(try Self.read(chunked, limit: 100).response.body.count == 100)
    }

    @Test("a stranger's bytes: bounded reads, then a refusal, never a crash or a wait past the limit")
    func malformed() {
        // A head that never ends stops once past its limit: the reader asked for little more than the limit.
        let endless = Stream(
            bytes: Array("HTTP/1.1 200 OK\r\nX: ".utf8) + [UInt8](repeating: 65, count: 1 << 20), piece: 4096)
        var reader = endless.reader()
        #expect(throws: RuntimeAPIError(.malformedResponse)) {
            try reader.read(bodyLimit: 1 << 20, discardsOversizedBody: false)
        }
        #expect(endless.offset <= HTTPResponseReader.headLimit + 2 * 4096)
        // A chunk-size line that never ends, likewise.
        let line = Stream(
            bytes: Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
                + [UInt8](repeating: 48, count: 1 << 20), piece: 512)
        var lineReader = line.reader()
        #expect(throws: RuntimeAPIError(.malformedResponse)) {
            try lineReader.read(bodyLimit: 1 << 20, discardsOversizedBody: false)
        }
        #expect(line.offset <= 64 * 1024)
        for text in [
            "", "garbage\r\n\r\n", "HTTP/2 200\r\n\r\n", "HTTP/1.1 2000 OK\r\n\r\n", "HTTP/1.1 099 Low\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 1e3\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 9999999999999999999\r\n\r\n", "HTTP/1.1 200 OK\r\nNo colon\r\n\r\n",
            "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", "HTTP/1.1 200 OK\r\n: empty\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        ] {
            let kind = Self.failure(text)
            #expect(kind == .malformedResponse || kind == .connectionLost, "\(text.debugDescription)")
        }
        #expect(Self.failure("") == .connectionLost)
        #expect(Self.failure("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort") == .connectionLost)
        #expect(Self.failure("HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n") == .malformedResponse)
    }
}

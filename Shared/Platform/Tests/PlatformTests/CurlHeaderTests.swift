@testable import Curl
import Testing

/// The response headers libcurl hands over line by line, as the client reads them (`Retry-After` decides a 429).
@Suite("response headers: the last response's, names lower-cased, values trimmed")
struct CurlHeaderTests {
    @Test("names lower-cased, spaces and tabs around a value dropped, a colon inside a value kept")
    func namesAndValues() {
        let headers = CurlTransfer.parseHeaders([
            "HTTP/2 429 \r\n", "Retry-After:  30 \r\n", "Content-Type:\tapplication/json; charset=UTF-8\r\n",
            "X-Where: https://example.com:443/x\r\n", "X-Empty:\r\n", "\r\n",
        ])
        #expect(headers["retry-after"] == "30")
        #expect(headers["content-type"] == "application/json; charset=UTF-8")
        #expect(headers["x-where"] == "https://example.com:443/x")
        #expect(headers["x-empty"] == "")
        #expect(headers.count == 4)
    }

    @Test("a header sent twice is joined with a comma; a later status line starts the headers afresh")
    func repeatedAndLater() {
        let headers = CurlTransfer.parseHeaders([
            "HTTP/1.1 100 Continue\r\n", "X-Early: 1\r\n", "\r\n", "HTTP/1.1 503 Service Unavailable\r\n",
            "Vary: Origin\r\n", "vary: Accept\r\n", "Retry-After: 2\r\n", "\r\n",
        ])
        #expect(headers == ["vary": "Origin, Accept", "retry-after": "2"])
    }
}

import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A loopback HTTP server that answers each request with the next of its canned answers (the last one again once
/// they run out) and keeps what each request carried. One request per connection (`Connection: close`). For the API
/// client's own behaviour — what it does with a 401 or a 503 — without the project's server.
public final class CannedHTTPServer: Sendable {
    public struct Answer: Sendable {
        public let status: Int
        public let body: String
        public let headers: [String: String]

        public init(status: Int, body: String, headers: [String: String] = [:]) {
            self.status = status
            self.body = body
            self.headers = headers
        }

        /// 200 `{"ok":true}`.
        public static let ok = Answer(status: 200, body: #"{"ok":true}"#)
        /// 401 `/problems/unauthorized`.
        public static let unauthorized = Answer(
            status: 401, body: #"{"type":"/problems/unauthorized","title":"Unauthorized","status":401}"#)
        /// 503 `/problems/unavailable`.
        public static let unavailable = Answer(
            status: 503, body: #"{"type":"/problems/unavailable","title":"Unavailable","status":503}"#)
    }

    public struct Request: Sendable, Hashable {
        public let path: String
        public let authorization: String?
        /// The request's body, as sent.
        public var body: String = ""
    }

    public let port: Int
    private let listener: Int32
    private let state: Locked<(answers: [Answer], requests: [Request])>

    public init(answers: [Answer]) throws {
        precondition(!answers.isEmpty)
        let (listener, port) = try listeningSocket()
        self.listener = listener
        self.port = port
        let state = Locked((answers: answers, requests: [Request]()))
        self.state = state
        Thread {
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { break }
                Thread { Self.serve(client: client, state: state) }.start()
            }
        }.start()
    }

    deinit {
        _ = shutdown(listener, Int32(SHUT_RDWR))
        closeDescriptor(listener)
    }

    public var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// The requests answered so far, in order.
    public var requests: [Request] { state.withLock { $0.requests } }

    private static func serve(client: Int32, state: Locked<(answers: [Answer], requests: [Request])>) {
        defer { closeDescriptor(client) }
        var received = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 16_384)
        let separator = Array("\r\n\r\n".utf8)
        var headerEnd: Int?
        var bodyLength = 0
        while headerEnd.map({ received.count < $0 + bodyLength }) ?? true {
            let count = buffer.withUnsafeMutableBytes { read(client, $0.baseAddress, $0.count) }
            guard count > 0 else { return }
            received += buffer[0..<count]
            if headerEnd == nil, let end = received.indices.first(where: { received[$0...].starts(with: separator) }) {
                headerEnd = end + separator.count
                let lines = String(decoding: received[0..<end], as: UTF8.self).components(separatedBy: "\r\n")
                bodyLength = lines.lazy.compactMap { Self.header($0, "content-length").flatMap { Int($0) } }.first ?? 0
            }
        }
        let lines = String(decoding: received[0..<(headerEnd ?? 0)], as: UTF8.self).components(separatedBy: "\r\n")
        let path = lines.first?.split(separator: " ").dropFirst().first.map(String.init) ?? ""
        let authorization = lines.lazy.compactMap { Self.header($0, "authorization") }.first
        let answer = state.withLock { state in
            let body = String(decoding: received[(headerEnd ?? received.count)...], as: UTF8.self)
            state.requests.append(Request(path: path, authorization: authorization, body: body))
            return state.answers.count > 1 ? state.answers.removeFirst() : state.answers[0]
        }
        var head = "HTTP/1.1 \(answer.status) Canned\r\nContent-Type: application/json\r\n"
        for (name, value) in answer.headers { head += "\(name): \(value)\r\n" }
        head += "Content-Length: \(answer.body.utf8.count)\r\nConnection: close\r\n\r\n"
        let bytes = Array((head + answer.body).utf8)
        var sent = 0
        while sent < bytes.count {
            let written = bytes.withUnsafeBytes { write(client, $0.baseAddress! + sent, bytes.count - sent) }
            guard written > 0 else { return }
            sent += written
        }
    }

    private static func header(_ line: String, _ name: String) -> String? {
        guard let colon = line.firstIndex(of: ":"), line[..<colon].lowercased() == name else { return nil }
        return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
}

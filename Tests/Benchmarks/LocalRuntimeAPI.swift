import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A local AWS Lambda Runtime API (the `2018-06-01` interface a custom runtime's `bootstrap` speaks) on 127.0.0.1,
/// answering as AWS's does: `GET /2018-06-01/runtime/invocation/next` blocks until an event exists and returns it
/// with `Lambda-Runtime-Aws-Request-Id`, `Lambda-Runtime-Deadline-Ms`, `Lambda-Runtime-Invoked-Function-Arn` and
/// `Lambda-Runtime-Trace-Id`; `POST …/invocation/{id}/response` and `…/{id}/error` answer 202 for an id handed out
/// and 400 for any other; `POST …/init/error` answers 202. HTTP/1.1 with keep-alive.
///
/// Blocking sockets, a thread per connection: the two moments the start-up benchmark needs — the event written to
/// the runtime's socket, the response read off it — are taken on the thread that does the I/O, with no event loop
/// between the socket and the clock.
final class LocalRuntimeAPI: @unchecked Sendable {
    /// An invocation's two moments and the runtime's answer.
    struct Answer {
        let handedOut: ContinuousClock.Instant
        let posted: ContinuousClock.Instant
        let body: [UInt8]
        /// `response` or `error`.
        let kind: String
    }

    /// `host:port`, the value of `AWS_LAMBDA_RUNTIME_API`.
    let address: String
    private let listener: Int32
    private let functionName: String
    /// Guards everything below.
    private let condition = NSCondition()
    private var queue: [(id: String, event: [UInt8])] = []
    private var handedOut: [String: ContinuousClock.Instant] = [:]
    private var answers: [String: Answer] = [:]
    private var connections: Set<Int32> = []
    private var accepted = 0
    private var stopped = false

    /// TCP connections accepted so far (a runtime that keeps its connection opens one).
    var connectionsAccepted: Int { condition.withLock { accepted } }

    init(functionName: String) throws {
        self.functionName = functionName
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw BenchmarkError("runtime API: socket failed") }
        self.listener = listener
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let size = length
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(listener, pointer, size) == 0 && listen(listener, 64) == 0
                    && getsockname(listener, pointer, &length) == 0
            }
        }
        guard bound else {
            close(listener)
            throw BenchmarkError("runtime API: bind failed")
        }
        self.address = "127.0.0.1:\(UInt16(bigEndian: address.sin_port))"
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// Queues `event` for the next `GET …/next`; returns its request id.
    func enqueue(_ event: [UInt8]) -> String {
        let id = UUID().uuidString.lowercased()
        condition.withLock {
            queue.append((id, event))
            condition.broadcast()
        }
        return id
    }

    /// Waits until the runtime has posted the response (or error) for `id`.
    func answer(_ id: String, timeout: Duration) throws -> Answer {
        let deadline = Date().addingTimeInterval(benchMilliseconds(timeout) / 1000)
        condition.lock()
        defer { condition.unlock() }
        while answers[id] == nil {
            guard condition.wait(until: deadline) || answers[id] != nil else {
                throw BenchmarkError("runtime API: no response for \(id) within \(timeout)")
            }
        }
        return answers.removeValue(forKey: id)!
    }

    /// Closes the listener and every connection; a `GET …/next` still waiting is answered by a closed socket.
    func stop() {
        condition.withLock {
            stopped = true
            for connection in connections { shutdown(connection, Int32(SHUT_RDWR)) }
            condition.broadcast()
        }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func acceptLoop() {
        while true {
            let connection = accept(listener, nil, nil)
            if connection < 0 {
                if errno == EINTR { continue }
                return
            }
            var yes: Int32 = 1
            setsockopt(connection, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
            let admitted = condition.withLock {
                if stopped { return false }
                connections.insert(connection)
                accepted += 1
                return true
            }
            guard admitted else {
                close(connection)
                return
            }
            let thread = Thread { [self] in
                serve(connection)
                condition.withLock { _ = connections.remove(connection) }
                close(connection)
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    private func serve(_ connection: Int32) {
        var reader = RequestReader(socket: connection)
        while let request = reader.next() {
            let parts = request.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
            // ["2018-06-01", "runtime", "invocation", "next"] / [..., "invocation", id, "response"|"error"]
            guard parts.count >= 4, parts[0] == "2018-06-01", parts[1] == "runtime" else {
                guard send(connection, status: 404, body: #"{"errorMessage":"not found"}"#) else { return }
                continue
            }
            if request.method == "GET", parts.count == 4, parts[2] == "invocation", parts[3] == "next" {
                guard handOut(on: connection) else { return }
            } else if request.method == "POST", parts.count == 5, parts[2] == "invocation",
                ["response", "error"].contains(parts[4])
            {
                let posted = ContinuousClock.now
                let known = condition.withLock {
                    guard let handed = handedOut.removeValue(forKey: parts[3]) else { return false }
                    answers[parts[3]] = Answer(handedOut: handed, posted: posted, body: request.body, kind: parts[4])
                    condition.broadcast()
                    return true
                }
                let sent =
                    known
                    ? send(connection, status: 202, body: #"{"status":"OK"}"#)
                    : send(
                        connection, status: 400,
                        body: #"{"errorMessage":"Invalid request ID","errorType":"InvalidRequestID"}"#)
                guard sent else { return }
            } else if request.method == "POST", parts.count == 4, parts[2] == "init", parts[3] == "error" {
                guard send(connection, status: 202, body: #"{"status":"OK"}"#) else { return }
            } else {
                guard send(connection, status: 404, body: #"{"errorMessage":"not found"}"#) else { return }
            }
        }
    }

    /// `GET …/next`: waits for an event while the runtime is still connected, then writes it. An event is taken
    /// only by a live connection: a runtime killed while its `GET` waited leaves no thread that would swallow the
    /// next process's event.
    private func handOut(on connection: Int32) -> Bool {
        condition.lock()
        while queue.isEmpty {
            if stopped || !Self.peerConnected(connection) {
                condition.unlock()
                return false
            }
            _ = condition.wait(until: Date().addingTimeInterval(0.1))
        }
        guard !stopped, Self.peerConnected(connection) else {
            condition.unlock()
            return false
        }
        let (id, event) = queue.removeFirst()
        condition.unlock()
        let deadline = Int64(Date().timeIntervalSince1970 * 1000) + 30_000
        let headers = [
            ("Content-Type", "application/json"),
            ("Lambda-Runtime-Aws-Request-Id", id),
            ("Lambda-Runtime-Deadline-Ms", String(deadline)),
            ("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:000000000000:function:\(functionName)"),
            ("Lambda-Runtime-Trace-Id", "Root=1-\(String(deadline / 1000, radix: 16))-\(id.prefix(24));Sampled=0"),
        ]
        let sent = send(connection, status: 200, headers: headers, body: event)
        let now = ContinuousClock.now
        condition.withLock { handedOut[id] = now }
        return sent
    }

    /// Whether the other end still holds the connection (a closed one reads as EOF without blocking).
    private static func peerConnected(_ connection: Int32) -> Bool {
        var byte: UInt8 = 0
        let count = recv(connection, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return count > 0 || (count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    }

    private func send(_ connection: Int32, status: Int, headers: [(String, String)] = [], body: String) -> Bool {
        send(
            connection, status: status, headers: [("Content-Type", "application/json")] + headers,
            body: Array(body.utf8))
    }

    private func send(_ connection: Int32, status: Int, headers: [(String, String)], body: [UInt8]) -> Bool {
        let reason = [200: "OK", 202: "Accepted", 400: "Bad Request", 404: "Not Found"][status] ?? "Error"
        var head = "HTTP/1.1 \(status) \(reason)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "Date: \(Self.httpDate())\r\nContent-Length: \(body.count)\r\n\r\n"
        let bytes = Array(head.utf8) + body
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(connection, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            sent += count
        }
        return true
    }

    private static func httpDate() -> String {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        var buffer = [CChar](repeating: 0, count: 64)
        let length = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Reads HTTP/1.1 requests off a blocking socket: the head up to the blank line, then a `Content-Length` or chunked
/// body.
private struct RequestReader {
    struct Request {
        let method: String
        let path: String
        let body: [UInt8]
    }

    let socket: Int32
    private var buffer: [UInt8] = []

    init(socket: Int32) {
        self.socket = socket
    }

    /// The next request; `nil` when the peer closed or sent something unreadable.
    mutating func next() -> Request? {
        let terminator: [UInt8] = Array("\r\n\r\n".utf8)
        var headEnd: Int?
        while true {
            if let end = Self.find(terminator, in: buffer) {
                headEnd = end
                break
            }
            guard fill() else { return nil }
        }
        guard let headEnd else { return nil }
        let head = String(decoding: buffer[..<headEnd], as: UTF8.self)
        buffer.removeFirst(headEnd + terminator.count)
        let lines = head.components(separatedBy: "\r\n")
        let requestLine = lines[0].split(separator: " ")
        guard requestLine.count >= 2 else { return nil }
        var fields: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var body: [UInt8] = []
        if fields["transfer-encoding"]?.lowercased() == "chunked" {
            while true {
                guard let line = readLine(), let size = Int(line.split(separator: ";")[0], radix: 16) else {
                    return nil
                }
                if size == 0 {
                    while let trailer = readLine(), !trailer.isEmpty {}
                    break
                }
                guard let chunk = read(count: size + 2) else { return nil }
                body += chunk.dropLast(2)
            }
        } else if let length = Int(fields["content-length"] ?? "0"), length > 0 {
            guard let bytes = read(count: length) else { return nil }
            body = bytes
        }
        let target = String(requestLine[1])
        return Request(method: String(requestLine[0]), path: String(target.split(separator: "?")[0]), body: body)
    }

    private mutating func readLine() -> String? {
        let crlf: [UInt8] = [13, 10]
        while true {
            if let end = Self.find(crlf, in: buffer) {
                let line = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeFirst(end + 2)
                return line
            }
            guard fill() else { return nil }
        }
    }

    private mutating func read(count: Int) -> [UInt8]? {
        while buffer.count < count {
            guard fill() else { return nil }
        }
        let bytes = Array(buffer[..<count])
        buffer.removeFirst(count)
        return bytes
    }

    private mutating func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            buffer += chunk[..<count]
            return true
        }
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count)
        where haystack[start..<start + needle.count].elementsEqual(needle) {
            return start
        }
        return nil
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The client of the Lambda Runtime API (`AWS_LAMBDA_RUNTIME_API`, `host:port`): HTTP/1.1 requests one at a time on
/// one kept-alive TCP connection, made at the first request and made again when the host closes it. The Runtime API
/// is plain HTTP on the sandbox's loopback, two requests per invocation (`next`, then the result): a socket, a
/// request written in one `send` and the answer read by ``HTTPResponseReader`` — what AWS's own runtimes for Go and
/// Rust do over their standard HTTP clients — rather than libcurl's general machinery, which was a third of a warm
/// recording function's CPU (docs/decisions.md#runtime-api-socket). libcurl stays the FCM sender's, loaded only by a
/// process that sends. Part of the thin binding to libc's sockets: no pointer leaves this file. Not `Sendable`: one
/// connection belongs to the loop's one thread.
public final class RuntimeAPIConnection {
    private let host: String
    private let port: String
    /// The `Host` header: the address's `host:port` as given.
    private let authority: String
    /// What every request's path is put under: the address's path, without a trailing slash ("" when none).
    private let pathPrefix: String
    private var descriptor: Int32 = -1
    private var scratch = [UInt8](repeating: 0, count: 64 * 1024)

    /// A client of the Runtime API at `address`: `host:port` (an IPv6 host in brackets), as Lambda sets
    /// `AWS_LAMBDA_RUNTIME_API`, optionally followed by a path that every request's path is put under (the gateway's
    /// per-worker secret, `127.0.0.1:PORT/<secret>`); nil when it is not one. Connects at the first request.
    public init?(address: String) {
        let slash = address.firstIndex(of: "/") ?? address.endIndex
        let hostAndPort = address[..<slash]
        let prefix = address[slash...]
        // The prefix goes into the request line: printable ASCII without spaces only.
        guard prefix.utf8.allSatisfy({ $0 > 32 && $0 < 127 }) else { return nil }
        guard let colon = hostAndPort.lastIndex(of: ":") else { return nil }
        var host = hostAndPort[..<colon]
        let port = hostAndPort[hostAndPort.index(after: colon)...]
        guard port.utf8.count <= 5, port.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let number = Int(port), (1...65535).contains(number)
        else { return nil }
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        guard !host.isEmpty,
            host.utf8.allSatisfy({ $0 > 32 && $0 < 127 && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "@") })
        else { return nil }
        self.host = String(host)
        self.port = String(port)
        self.authority = String(hostAndPort)
        self.pathPrefix = String(prefix.hasSuffix("/") ? prefix.dropLast() : prefix)
    }

    deinit {
        close()
    }

    /// Closes the connection; the next request makes a new one.
    public func close() {
        guard descriptor >= 0 else { return }
        _ = Self.closeDescriptor(descriptor)
        descriptor = -1
    }

    /// Sends one request for `path` (under the address's path) and reads its response, within `timeoutMilliseconds`
    /// (connecting included). On a kept
    /// connection that the host had closed meanwhile — nothing of an answer arrived — the request is sent once more
    /// on a new connection, as libcurl and browsers do: the host never read the first.
    public func perform(
        method: String, path: String, body: [UInt8] = [], contentType: String? = nil, bodyLimit: Int,
        discardsOversizedBody: Bool = false, timeoutMilliseconds: Int
    ) -> Result<RuntimeAPIResponse, RuntimeAPIError> {
        let deadline = ContinuousClock.now + .milliseconds(timeoutMilliseconds)
        var head = "\(method) \(pathPrefix)\(path) HTTP/1.1\r\nHost: \(authority)\r\n"
        if let contentType { head += "Content-Type: \(contentType)\r\n" }
        if method != "GET" || !body.isEmpty { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        let request = Array(head.utf8) + body
        let reused = descriptor >= 0
        let first = attempt(request, deadline: deadline, bodyLimit: bodyLimit, discards: discardsOversizedBody)
        if reused, case .failure(let error) = first.result, error.kind == .connectionLost, !first.received {
            return attempt(request, deadline: deadline, bodyLimit: bodyLimit, discards: discardsOversizedBody).result
        }
        return first.result
    }

    private func attempt(_ request: [UInt8], deadline: ContinuousClock.Instant, bodyLimit: Int, discards: Bool) -> (
        result: Result<RuntimeAPIResponse, RuntimeAPIError>, received: Bool
    ) {
        var received = false
        do throws(RuntimeAPIError) {
            if descriptor < 0 { try makeConnection(deadline: deadline) }
            try sendAll(request, deadline: deadline)
            var reader = HTTPResponseReader { (buffer: inout [UInt8]) throws(RuntimeAPIError) -> Bool in
                let count = try self.receive(into: &buffer, deadline: deadline)
                if count > 0 { received = true }
                return count > 0
            }
            let (response, keepAlive) = try reader.read(bodyLimit: bodyLimit, discardsOversizedBody: discards)
            // A server that sent more than one answer's worth is not one to send the next request to.
            if !keepAlive || reader.hasLeftover { close() }
            return (.success(response), received)
        } catch {
            close()
            return (.failure(error), received)
        }
    }

    // MARK: - libc's sockets

    #if canImport(Glibc)
        private static let streamType = Int32(SOCK_STREAM.rawValue)
        private static let sendFlags = Int32(MSG_NOSIGNAL)
    #else
        private static let streamType = SOCK_STREAM
        private static let sendFlags: Int32 = 0
    #endif

    private static func closeDescriptor(_ descriptor: Int32) -> Int32 {
        #if canImport(Glibc)
            Glibc.close(descriptor)
        #else
            Darwin.close(descriptor)
        #endif
    }

    /// Resolves the host (a numeric address is not looked up) and connects to the first address that accepts,
    /// non-blocking, with Nagle's algorithm off (a request is written whole; its answer should not wait for an ACK).
    private func makeConnection(deadline: ContinuousClock.Instant) throws(RuntimeAPIError) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Self.streamType
        hints.ai_flags = AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, port, &hints, &list) == 0, let first = list else {
            throw RuntimeAPIError(.connectionFailed)
        }
        defer { freeaddrinfo(first) }
        var entry: UnsafeMutablePointer<addrinfo>? = first
        var timedOut = false
        while let current = entry, !timedOut {
            entry = current.pointee.ai_next
            let candidate = socket(current.pointee.ai_family, Self.streamType, 0)
            guard candidate >= 0 else { continue }
            _ = fcntl(candidate, F_SETFD, FD_CLOEXEC)
            _ = fcntl(candidate, F_SETFL, fcntl(candidate, F_GETFL) | O_NONBLOCK)
            var one: Int32 = 1
            _ = setsockopt(candidate, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            if connect(candidate, current.pointee.ai_addr, current.pointee.ai_addrlen) == 0 {
                descriptor = candidate
                return
            }
            if errno == EINPROGRESS {
                do throws(RuntimeAPIError) {
                    try Self.wait(candidate, for: Int16(POLLOUT), deadline: deadline)
                    var failure: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    if getsockopt(candidate, SOL_SOCKET, SO_ERROR, &failure, &length) == 0, failure == 0 {
                        descriptor = candidate
                        return
                    }
                } catch {
                    timedOut = error.kind == .timedOut
                }
            }
            _ = Self.closeDescriptor(candidate)
        }
        throw RuntimeAPIError(timedOut ? .timedOut : .connectionFailed)
    }

    private func sendAll(_ bytes: [UInt8], deadline: ContinuousClock.Instant) throws(RuntimeAPIError) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes {
                send(descriptor, $0.baseAddress! + offset, $0.count - offset, Self.sendFlags)
            }
            if sent >= 0 {
                offset += sent
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                try Self.wait(descriptor, for: Int16(POLLOUT), deadline: deadline)
            } else if errno != EINTR {
                throw RuntimeAPIError(.connectionLost)
            }
        }
    }

    /// Appends what arrives to `buffer`, waiting until something does; 0 when the host has closed the connection.
    private func receive(into buffer: inout [UInt8], deadline: ContinuousClock.Instant) throws(RuntimeAPIError)
        -> Int
    {
        while true {
            let count = scratch.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count >= 0 {
                buffer.append(contentsOf: scratch[0..<count])
                return count
            }
            if errno == EAGAIN || errno == EWOULDBLOCK {
                try Self.wait(descriptor, for: Int16(POLLIN), deadline: deadline)
            } else if errno != EINTR {
                throw RuntimeAPIError(.connectionLost)
            }
        }
    }

    /// Waits until `descriptor` is ready for `events` (or has failed: the next call says how), or the deadline.
    private static func wait(_ descriptor: Int32, for events: Int16, deadline: ContinuousClock.Instant)
        throws(RuntimeAPIError)
    {
        while true {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { throw RuntimeAPIError(.timedOut) }
            // Rounded up, so that the last fraction of a millisecond is waited for rather than spun through.
            let milliseconds =
                left.components.seconds * 1000 + (left.components.attoseconds + 999_999_999_999_999)
                / 1_000_000_000_000_000
            var entry = pollfd(fd: descriptor, events: events, revents: 0)
            let ready = poll(&entry, 1, Int32(clamping: milliseconds))
            if ready > 0 { return }
            if ready < 0, errno != EINTR { throw RuntimeAPIError(.connectionLost) }
        }
    }
}

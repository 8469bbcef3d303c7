import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A plain TCP connection to 127.0.0.1, for what no HTTP client will do on purpose: send a header block byte by
/// byte, stop half-way through a body, open connections and send nothing. The thin binding of libc's sockets that
/// the host-hardening tests need; blocking, with a deadline on every read.
package final class RawConnection {
    private var descriptor: Int32

    package enum Failure: Error { case socket(Int32), connect(Int32) }

    package init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw Failure.socket(errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let error = errno
            _ = Glibc.close(descriptor)
            throw Failure.connect(error)
        }
    }

    deinit { close() }

    package func close() {
        if descriptor >= 0 { _ = Glibc.close(descriptor) }
        descriptor = -1
    }

    /// Sends all of `text`; `false` when the peer has closed or reset the connection.
    @discardableResult
    package func send(_ text: String) -> Bool {
        var bytes = Array(text.utf8)
        while !bytes.isEmpty {
            let sent = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return false }
            bytes.removeFirst(sent)
        }
        return true
    }

    /// What the peer sends until it closes the connection or `seconds` pass, and whether it closed.
    package func receive(for seconds: Double) -> (text: String, closed: Bool) {
        var received: [UInt8] = []
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return (String(decoding: received, as: UTF8.self), false) }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(left * 1000) + 1) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 64 * 1024)
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return (String(decoding: received, as: UTF8.self), true) }
            received += chunk[0..<count]
        }
    }

    /// The first response's status code, read until its header block is complete (or `seconds` pass).
    package func status(within seconds: Double) -> Int? {
        var received: [UInt8] = []
        let deadline = Date().addingTimeInterval(seconds)
        while !received.contains(UInt8(ascii: "\n")) {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return nil }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(left * 1000) + 1) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 1)
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, 1, 0) }
            guard count > 0 else { break }
            received += chunk[0..<count]
        }
        let line = String(decoding: received, as: UTF8.self)
        let parts = line.split(separator: " ")
        return parts.count >= 2 && parts[0].hasPrefix("HTTP/1.") ? Int(parts[1]) : nil
    }
}

import Foundation

#if canImport(Glibc)
    import Glibc
    private let streamSocket = Int32(SOCK_STREAM.rawValue)
#elseif canImport(Darwin)
    import Darwin
    private let streamSocket = SOCK_STREAM
#endif

// Loopback sockets for the transport tests: the thin C layer under them (BSD sockets) is all here. BSD sockets and
// `Thread` exist on Linux, macOS and iOS alike, so the server-free tests use them too.

func closeDescriptor(_ descriptor: Int32) {
    _ = close(descriptor)
}

/// A listening loopback socket on a free port.
func listeningSocket() throws -> (descriptor: Int32, port: Int) {
    let descriptor = socket(AF_INET, streamSocket, 0)
    guard descriptor >= 0 else { throw CocoaError(.fileReadUnknown) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(descriptor, pointer, length) == 0 && listen(descriptor, 16) == 0
                && getsockname(descriptor, pointer, &length) == 0
        }
    }
    guard bound else {
        closeDescriptor(descriptor)
        throw CocoaError(.fileReadUnknown)
    }
    return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
}

/// A loopback TCP port that accepts connections (the kernel completes the handshake) but never answers: what a hung
/// server looks like to a client. `close()` turns it into a port that refuses connections.
public final class SilentListener {
    private var descriptor: Int32
    public let port: Int

    public init() throws {
        (descriptor, port) = try listeningSocket()
    }

    public var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    public func close() {
        if descriptor >= 0 { closeDescriptor(descriptor) }
        descriptor = -1
    }

    deinit { close() }
}

/// A slow network in front of a real server: forwards each connection to `127.0.0.1:upstreamPort` and holds every
/// answer back for `delay` before passing it on. Counts the requests it carried.
public final class SlowProxy: Sendable {
    public let port: Int
    private let listener: Int32
    private let requests = Counter()

    public init(upstreamPort: Int, delay: Duration) throws {
        let (listener, port) = try listeningSocket()
        self.listener = listener
        self.port = port
        let requests = self.requests
        Thread {
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { break }
                Thread { Self.relay(client: client, upstreamPort: upstreamPort, delay: delay, requests: requests) }
                    .start()
            }
        }.start()
    }

    deinit {
        _ = shutdown(listener, Int32(SHUT_RDWR))
        closeDescriptor(listener)
    }

    public var url: URL { URL(string: "http://127.0.0.1:\(port)")! }
    /// Requests carried so far.
    public var requestCount: Int { requests.value }

    private static func relay(client: Int32, upstreamPort: Int, delay: Duration, requests: Counter) {
        let upstream = socket(AF_INET, streamSocket, 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(upstreamPort).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard upstream >= 0, connected else {
            closeDescriptor(client)
            if upstream >= 0 { closeDescriptor(upstream) }
            return
        }
        let done = Counter()
        @Sendable func finish() {
            if done.increment() == 2 {
                closeDescriptor(client)
                closeDescriptor(upstream)
            }
        }
        // Per connection: requests sent, and answers held back so far (keep-alive carries several).
        let sent = Counter()
        let answered = Counter()
        Thread {
            pump(from: client, to: upstream) { chunk in
                // A request starts with its method; the body may follow in a chunk of its own.
                guard chunk.starts(with: Array("POST ".utf8)) || chunk.starts(with: Array("GET ".utf8)) else { return }
                sent.increment()
                requests.increment()
            }
            finish()
        }.start()
        pump(from: upstream, to: client) { _ in
            guard answered.value < sent.value else { return }
            Thread.sleep(forTimeInterval: Double(delay.components.seconds))
            while answered.value < sent.value { answered.increment() }
        }
        finish()
    }

    /// Copies bytes until the source ends; `each` runs before each chunk is passed on (a request or an answer fits
    /// in one chunk here: small JSON bodies over loopback).
    private static func pump(from source: Int32, to destination: Int32, each: (ArraySlice<UInt8>) -> Void) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            each(buffer[0..<count])
            var sent = 0
            while sent < count {
                let written = buffer.withUnsafeBytes { write(destination, $0.baseAddress! + sent, count - sent) }
                guard written > 0 else { return }
                sent += written
            }
        }
        _ = shutdown(destination, Int32(SHUT_WR))
    }
}

/// A number several threads add to.
public final class Counter: Sendable {
    private let storage = Locked(0)

    public init() {}

    @discardableResult
    public func increment() -> Int {
        storage.withLock {
            $0 += 1
            return $0
        }
    }

    public var value: Int { storage.withLock { $0 } }
}

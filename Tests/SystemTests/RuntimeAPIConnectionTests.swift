import Foundation
import FunctionRuntime
import Testing
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// The Runtime API's client (``RuntimeAPIConnection``) against hosts that misbehave, on real sockets: each request
/// ends by its deadline with a named failure, whatever the host sends or withholds; and what it sends is the request
/// line the address says.
// The limit guards against a hang only (each request's deadline is asserted inside): under the parallel suites on two
// cores a test can wait minutes for a thread before it runs, as DbMigrateTests' did.
@Suite("the Runtime API client against hosts that misbehave", .timeLimit(.minutes(6)))
struct RuntimeAPIConnectionTests {
    /// A host on a loopback port (printed as its first line) that reads each request's head, then, by its
    /// argument: `silent` answers nothing and holds the connection; `garbage` answers what is not HTTP;
    /// `endless` starts a head that never ends (4 MiB of one header); `echo` answers 200 with the request line as
    /// the body.
    static let host = #"""
        import socket, sys, threading, time
        mode = sys.argv[1]
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        print(server.getsockname()[1], flush=True)
        def serve(connection):
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = connection.recv(65536)
                if not chunk:
                    return
                data += chunk
            try:
                if mode == "garbage":
                    connection.sendall(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
                elif mode == "endless":
                    connection.sendall(b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * (4 << 20))
                elif mode == "echo":
                    line = data.split(b"\r\n")[0]
                    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(line) + line)
            except OSError:
                pass
            time.sleep(3600)
        while True:
            connection, _ = server.accept()
            threading.Thread(target=serve, args=(connection,), daemon=True).start()
        """#

    /// Starts ``host`` in `mode`; returns it and its port.
    static func start(_ mode: String) throws -> (Process, Int) {
        try PythonServer.start(host, arguments: [mode])
    }

    static func stop(_ process: Process) {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// One GET with a deadline (300 ms unless told); the failure it ended with (nil: an answer) and how long it took.
    static func failure(_ connection: RuntimeAPIConnection, timeoutMilliseconds: Int = 300) -> (
        kind: RuntimeAPIError.Kind?, seconds: Double
    ) {
        let started = Date()
        let result = connection.perform(
            method: "GET", path: "/2018-06-01/runtime/invocation/next", bodyLimit: 1 << 20,
            timeoutMilliseconds: timeoutMilliseconds)
        let seconds = Date().timeIntervalSince(started)
        if case .failure(let error) = result { return (error.kind, seconds) }
        return (nil, seconds)
    }

    @Test(
        "a host that never answers, answers garbage, or sends a head without end: timed out or refused by the deadline")
    func misbehavingHosts() throws {
        // The silent host is given 300 ms and must time out; the others answer at once and must be refused on what
        // they send, so they are given 10 s — a loaded machine may take longer than 300 ms to run the host's thread
        // at all, which made a 300 ms deadline here a race.
        for (mode, expected, deadline) in [
            ("silent", RuntimeAPIError.Kind.timedOut, 300), ("garbage", .malformedResponse, 10_000),
            ("endless", .malformedResponse, 10_000),
        ] {
            let (process, port) = try Self.start(mode)
            defer { Self.stop(process) }
            let connection = try #require(RuntimeAPIConnection(address: "127.0.0.1:\(port)"))
            let outcome = Self.failure(connection, timeoutMilliseconds: deadline)
            #expect(outcome.kind == expected, "\(mode)")
            // Bounded by the request's own deadline, not by the host (generous: the machine is shared).
            #expect(outcome.seconds < Double(deadline) / 1000 + 5, "\(mode): \(outcome.seconds) s")
        }
        // Nothing listening: no connection, at once.
        let (process, port) = try Self.start("silent")
        Self.stop(process)
        let closed = try #require(RuntimeAPIConnection(address: "127.0.0.1:\(port)"))
        #expect(Self.failure(closed).kind == .connectionFailed)
    }

    @Test(
        "the request line is the address's path and the request's; an address that is not host:port[/path] is refused")
    func addresses() throws {
        let (process, port) = try Self.start("echo")
        defer { Self.stop(process) }
        for (address, line) in [
            ("127.0.0.1:\(port)", "GET /2018-06-01/runtime/invocation/next HTTP/1.1"),
            ("127.0.0.1:\(port)/worker-secret/", "GET /worker-secret/2018-06-01/runtime/invocation/next HTTP/1.1"),
            ("localhost:\(port)/a/b", "GET /a/b/2018-06-01/runtime/invocation/next HTTP/1.1"),
        ] {
            let connection = try #require(RuntimeAPIConnection(address: address))
            let result = connection.perform(
                method: "GET", path: "/2018-06-01/runtime/invocation/next", bodyLimit: 1 << 20,
                timeoutMilliseconds: 5000)
            let body = try result.get().body
            #expect(String(decoding: body, as: UTF8.self) == line, "\(address)")
        }
        for address in [
            "", "127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:+80", ":9001",
            "127.0.0.1:9001/a b", "127.0.0.1:9001/a\r\nX: y", "user@127.0.0.1:9001", "127.0.0.1:9001\u{7f}",
        ] {
            #expect(RuntimeAPIConnection(address: address) == nil, "\(address.debugDescription)")
        }
        #expect(RuntimeAPIConnection(address: "[::1]:9001") != nil)
    }
}

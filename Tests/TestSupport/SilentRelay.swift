import Foundation

/// A TCP relay on 127.0.0.1 in front of a server, which the test can make go silent: from then on it reads
/// everything both sides send and forwards nothing, keeping every connection open. Each side's kernel still
/// acknowledges, so TCP keepalives and `tcp_user_timeout` notice nothing: what a pooler or proxy whose upstream
/// failed over, or a partition behind a middlebox, looks like to a client. Only a deadline of the client's own ends
/// its wait.
package final class SilentRelay {
    package let port: Int
    private let process: Process
    private let directory: URL
    private var control: URL { directory.appendingPathComponent("silent") }

    /// Relays 127.0.0.1:`port` (picked) to `host`:`targetPort`.
    package init(to host: String = "127.0.0.1", port targetPort: Int) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        (process, port) = try PythonServer.start(
            Self.script, arguments: [host, String(targetPort), directory.appendingPathComponent("silent").path])
    }

    deinit {
        // SIGKILL: the relay's threads would outlive a SIGTERM that the test runner's children may inherit ignored.
        if process.isRunning, process.processIdentifier > 0 { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }

    /// From now on nothing is forwarded, in either direction, on any connection.
    package func goSilent() throws {
        try Data().write(to: control)
    }

    /// `url` (a libpq URI) with its host and port replaced by this relay's.
    package func relaying(_ url: String) -> String {
        guard var components = URLComponents(string: url) else { return url }
        components.host = "127.0.0.1"
        components.port = port
        return components.string ?? url
    }

    private static let script = #"""
        import os, socket, sys, threading
        host, target_port, control = sys.argv[1], int(sys.argv[2]), sys.argv[3]
        threading.stack_size(256 * 1024)  # two threads per connection, under the tests' data limit
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        print(listener.getsockname()[1], flush=True)
        def pump(source, sink):
            while True:
                try:
                    data = source.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                if os.path.exists(control):
                    continue  # read and dropped: the sender's kernel saw it acknowledged
                try:
                    sink.sendall(data)
                except OSError:
                    return
        while True:
            client, _ = listener.accept()
            upstream = socket.create_connection((host, target_port))
            threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
        """#
}

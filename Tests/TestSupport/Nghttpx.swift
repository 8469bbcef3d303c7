import Curl
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// nghttpx (the nghttp2 project's reverse proxy) terminating TLS with ALPN h2 on 127.0.0.1 in front of an HTTP/1.1
/// backend, under a throwaway self-signed certificate, logging each request's client port (one per connection).
package final class Nghttpx {
    package struct Entry {
        package let clientPort: String
        package let alpn: String
        package let status: Int
        package let path: String
    }

    package let port: Int
    package let certificateFile: String
    private let directory: URL
    private let process: Process
    private let logFile: URL

    package var baseURL: String { "https://127.0.0.1:\(port)" }

    /// The master process's id (its worker is a child of it).
    package var processIdentifier: pid_t { process.processIdentifier }

    package init(backendPort: Int) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("nghttpx-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let key = directory.appendingPathComponent("key.pem").path
        certificateFile = directory.appendingPathComponent("cert.pem").path
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        openssl.arguments = [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            key, "-out", certificateFile, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
            "subjectAltName=IP:127.0.0.1",
        ]
        openssl.standardOutput = FileHandle.nullDevice
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        guard openssl.terminationStatus == 0 else { throw NghttpxError.setup("openssl req failed") }
        logFile = directory.appendingPathComponent("access.log")
        port = try freeLocalPort()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/nghttpx")
        process.arguments = [
            "--conf=/dev/null", "--frontend=127.0.0.1,\(port)", "--backend=127.0.0.1,\(backendPort)",
            "--workers=1", "--frontend-http2-max-concurrent-streams=100", "--backend-connections-per-host=1000",
            "--no-ocsp", "--log-level=ERROR", "--errorlog-file=\(directory.appendingPathComponent("error.log").path)",
            "--accesslog-file=\(logFile.path)", "--accesslog-format=$remote_port $alpn $status $path",
            "--pid-file=\(directory.appendingPathComponent("pid").path)", key, certificateFile,
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        let probe = CurlRequest(url: "https://127.0.0.1:\(port)/", trust: TrustStore(caFile: certificateFile))
        let answers = {
            if case .success = CurlClient.perform(probe, timeoutMilliseconds: 1000) { true } else { false }
        }
        guard eventually(seconds: 10, answers) else {
            kill(process.processIdentifier, SIGKILL)
            throw NghttpxError.setup("nghttpx did not listen")
        }
    }

    deinit {
        // nghttpx's master keeps the signal mask it inherits from the test's thread, which blocks SIGTERM and SIGQUIT:
        // SIGKILL, which cannot be blocked; its worker sees its master gone and exits too.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }

    package enum NghttpxError: Error { case setup(String) }

    /// The requests nghttpx has logged, oldest first.
    package func accessLog() throws -> [Entry] {
        let text = (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 4, let status = Int(fields[2]) else { return nil }
            return Entry(
                clientPort: String(fields[0]), alpn: String(fields[1]), status: status, path: String(fields[3]))
        }
    }
}

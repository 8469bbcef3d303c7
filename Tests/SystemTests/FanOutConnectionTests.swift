import Codecs
import Curl
import CaregiverPush
import Foundation
import Testing
import TestSupport

/// HTTP/2 fan-out that really multiplexes (issue 29): the transfers of a batch wait for a connection that can carry
/// them as streams instead of each opening its own, and a batch larger than one connection's 100 streams opens just
/// the connections it needs, all in flight at once. Checked against the FCM emulator's own count of connections
/// and against nghttpx, a TLS + HTTP/2 front that is not ours, through the built `dose-record`.
@Suite("HTTP/2 fan-out: streams of just enough connections")
struct FanOutConnectionTests {
    /// Every send arrived before the first one was answered (the emulator answers each after `delay`): they were all
    /// in flight together, not in rounds.
    static func allInFlightTogether(_ requests: [JSONValue], delayMilliseconds: Double) -> Bool {
        let received = requests.map(FCMOverTLSTests.receivedAt)
        guard let first = received.min(), let last = received.max() else { return false }
        return last - first < delayMilliseconds
    }

    @Test("100 devices: 100 streams of one connection")
    func hundredOnOne() throws {
        let fake = try FCMFake(delayMilliseconds: 1000, tls: true)
        let home = try DurablePushTests.home(devices: 100)
        let run = try Executables.run(
            "dose-record", input: home.doseEvent(), environment: fake.environment(home.database))
        #expect(run.response?.statusCode == 200)
        let requests = try FCMOverTLSTests.requests(fake, tokens: home.tokens)
        #expect(requests.count == 100 && requests.allSatisfy { $0["status"] == .number(200) })
        let stats = try fake.stats()
        #expect(stats["connections"] == .number(1))
        #expect(stats["maxConcurrentStreams"] == .number(100))
        #expect(stats["http2Requests"] == .number(100))
        #expect(Self.allInFlightTogether(requests, delayMilliseconds: 1000))
        #expect(try DurablePushTests.deliveries(home).allSatisfy { $0.status == "SENT" })
    }

    @Test("250 devices: three connections (100 + 100 + 50 streams), every send in flight at once")
    func justEnoughConnections() throws {
        let fake = try FCMFake(delayMilliseconds: 1000, tls: true)
        let home = try DurablePushTests.home(devices: 250)
        let run = try Executables.run(
            "dose-record", input: home.doseEvent(), environment: fake.environment(home.database))
        #expect(run.response?.statusCode == 200)
        let requests = try FCMOverTLSTests.requests(fake, tokens: home.tokens)
        #expect(requests.count == 250 && requests.allSatisfy { $0["status"] == .number(200) })
        let stats = try fake.stats()
        #expect(stats["connections"] == .number(3))
        #expect(stats["maxConcurrentStreams"] == .number(100))
        #expect(stats["http2Requests"] == .number(250))
        #expect(Self.allInFlightTogether(requests, delayMilliseconds: 1000))
        #expect(try DurablePushTests.deliveries(home).allSatisfy { $0.status == "SENT" })
    }

    @Test("behind nghttpx (TLS + HTTP/2, not ours): 100 devices on one connection, 250 on three, all in flight")
    func behindNghttpx() throws {
        let backend = try FCMFake(delayMilliseconds: 1000)
        let front = try Nghttpx(backendPort: backend.port)
        let database = try IsolatedDatabase()
        for (devices, connections) in [(100, 1), (250, 3)] {
            let home = try DurablePushTests.home(in: database, devices: devices)
            let before = try front.accessLog().count
            let run = try Executables.run(
                "dose-record", input: home.doseEvent(),
                environment: backend.environment(
                    database, ["FCM_API_BASE_URL": front.baseURL, "SSL_CERT_FILE": front.certificateFile]))
            #expect(run.response?.statusCode == 200)
            #expect(try eventually { try front.accessLog().count - before >= devices })
            let sends = try front.accessLog().dropFirst(before).filter { $0.path.hasSuffix("/messages:send") }
            #expect(sends.count == devices && sends.allSatisfy { $0.status == 200 && $0.alpn == "h2" })
            #expect(Set(sends.map(\.clientPort)).count == connections, "\(devices) devices")
            let requests = try FCMOverTLSTests.requests(backend, tokens: home.tokens)
            #expect(requests.count == devices)
            #expect(Self.allInFlightTogether(requests, delayMilliseconds: 1000), "\(devices) devices")
            #expect(try DurablePushTests.deliveries(home).allSatisfy { $0.status == "SENT" })
        }
    }
}

/// nghttpx (the nghttp2 project's reverse proxy) terminating TLS with ALPN h2 on 127.0.0.1 in front of an HTTP/1.1
/// backend, under a throwaway self-signed certificate, logging each request's client port (one per connection).
final class Nghttpx {
    struct Entry {
        let clientPort: String
        let alpn: String
        let status: Int
        let path: String
    }

    let port: Int
    let certificateFile: String
    private let directory: URL
    private let process: Process
    private let logFile: URL

    var baseURL: String { "https://127.0.0.1:\(port)" }

    init(backendPort: Int) throws {
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

    enum NghttpxError: Error { case setup(String) }

    /// The requests nghttpx has logged, oldest first.
    func accessLog() throws -> [Entry] {
        let text = (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 4, let status = Int(fields[2]) else { return nil }
            return Entry(
                clientPort: String(fields[0]), alpn: String(fields[1]), status: status, path: String(fields[3]))
        }
    }
}

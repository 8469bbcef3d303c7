import Codecs
import Curl
import CaregiverPush
import Foundation
import Testing
import TestSupport

/// The production edge as production meets it: FCM and Google's token endpoint over TLS with ALPN h2, verified
/// against a CA the functions are told to trust (`SSL_CERT_FILE`), through the built executables.
@Suite("FCM over TLS + HTTP/2")
struct FCMOverTLSTests {
    /// The requests the fake received for `tokens`, oldest first.
    static func requests(_ fake: FCMFake, tokens: [String]) throws -> [JSONValue] {
        let wanted = Set(tokens)
        return try fake.requests().filter { wanted.contains($0["token"]?.stringValue ?? "") }
    }

    static func receivedAt(_ request: JSONValue) -> Double {
        request["receivedAtMs"]?.numberValue ?? 0
    }

    @Test("one event's 50 devices go as HTTP/2 streams of one TLS connection, many in flight at once")
    func fanOutOnOneConnection() throws {
        let fake = try FCMFake(delayMilliseconds: 200, tls: true)
        let home = try DurablePushTests.home(devices: 50)
        let run = try Executables.run(
            "dose-record", input: home.doseEvent(), environment: fake.environment(home.database))
        #expect(run.response?.statusCode == 200)
        let requests = try Self.requests(fake, tokens: home.tokens)
        #expect(requests.count == 50 && requests.allSatisfy { $0["status"] == .number(200) })
        #expect(requests.allSatisfy { $0["httpVersion"] == .string("2") })
        let stats = try fake.stats()
        #expect(stats["tls"] == .bool(true))
        #expect(stats["connections"] == .number(1))
        #expect(stats["http2Requests"] == .number(50))
        // Each answer takes 200 ms: had the streams not overlapped, fifty would have taken ten seconds.
        #expect(stats["maxConcurrentStreams"] == .number(50))
        #expect(try fake.mints == 1)
        #expect(try DurablePushTests.deliveries(home).allSatisfy { $0.status == "SENT" })
    }

    @Test("a warm worker's second push reuses its TLS connection and its access token: no new handshake")
    func warmWorkerReusesConnection() throws {
        let fake = try FCMFake(tls: true)
        let database = try IsolatedDatabase()
        let first = try DurablePushTests.home(in: database, devices: 3)
        let second = try DurablePushTests.home(in: database, devices: 3)
        let table = try doseRecordOnlyTable(timeoutSeconds: 10)
        defer { try? FileManager.default.removeItem(at: table) }
        let server = try RunnerServer(
            arguments: ["--mode", "warm", "--warm-workers", "1", "--debug-headers", "--functions", table.path],
            environment: fake.environment(database))
        func record(_ home: DurablePushTests.Home) throws -> Int32? {
            let event = try JSONValue.parse(Array(home.doseEvent()))
            let response = try server.request(
                "POST", "/api/dose-records",
                headers: ["content-type": "application/json", "authorization": "Bearer \(home.patientToken)"],
                body: event["body"]?.stringValue ?? "")
            #expect(response.status == 200)
            #expect(try eventually { try DurablePushTests.deliveries(home).allSatisfy { $0.status == "SENT" } })
            return response.headers["x-gateway-pid"].flatMap(Int32.init)
        }
        let firstWorker = try record(first)
        let afterFirst = try fake.stats()
        #expect(afterFirst["connections"] == .number(1))
        let secondWorker = try record(second)
        #expect(firstWorker != nil && secondWorker == firstWorker)
        let afterSecond = try fake.stats()
        #expect(afterSecond["connections"] == .number(1), "the second push opened a new connection")
        #expect(afterSecond["http2Requests"] == .number(6))
        #expect(afterSecond["mints"] == .number(1))
        let connections = try Self.requests(fake, tokens: first.tokens + second.tokens).map { $0["connection"] }
        #expect(Set(connections.map { String(describing: $0) }).count == 1)
    }

    /// A home whose access token is already cached (one push over the right CA), then a dose recorded with `trust`
    /// changed: the send itself meets the certificate problem.
    private func recordWithBrokenTLS(
        _ overrides: (FCMFake) throws -> [String: String?]
    ) throws -> (fake: FCMFake, home: DurablePushTests.Home, run: Executables.Run) {
        let fake = try FCMFake(tls: true)
        let database = try IsolatedDatabase()
        let warmUp = try DurablePushTests.home(in: database, devices: 1)
        let first = try Executables.run(
            "dose-record", input: warmUp.doseEvent(), environment: fake.environment(database))
        #expect(first.response?.statusCode == 200)
        #expect(try fake.messages(to: Set(warmUp.tokens)).count == 1)
        let home = try DurablePushTests.home(in: database, devices: 2)
        var environment = try overrides(fake)
        environment["PUSH_SEND_DEADLINE_MS"] = "1500"
        let run = try Executables.run(
            "dose-record", input: home.doseEvent(), environment: fake.environment(database, environment))
        #expect(run.response?.statusCode == 200)
        return (fake, home, run)
    }

    private func expectLeftForRetry(
        _ fake: FCMFake, _ home: DurablePushTests.Home, _ run: Executables.Run, logSays: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        #expect(try Self.requests(fake, tokens: home.tokens).isEmpty, sourceLocation: sourceLocation)
        let owed = try DurablePushTests.deliveries(home)
        #expect(owed.count == 2, sourceLocation: sourceLocation)
        #expect(
            owed.allSatisfy { $0.status == "PENDING" && $0.lastError?.contains("tlsVerificationFailed") == true },
            sourceLocation: sourceLocation)
        let logLines = run.stderr.split(separator: "\n").filter { $0.contains("push: FCM certificate not trusted") }
        #expect(!logLines.isEmpty, sourceLocation: sourceLocation)
        #expect(logLines.contains { $0.contains(logSays) }, "\(logLines)", sourceLocation: sourceLocation)
        // Nothing secret in what the function said: no device token, no access token, no key, no medication.
        for secret in home.tokens + ["ya29.", "PRIVATE KEY", "秘密", "Bearer"] {
            #expect(!run.stderr.contains(secret), sourceLocation: sourceLocation)
        }
    }

    @Test("a certificate from a CA the function does not trust: nothing sent, left for retry, logged without secrets")
    func wrongCertificateAuthority() throws {
        let stranger = try FCMFake(tls: true)  // its CA signed nothing the function talks to
        let (fake, home, run) = try recordWithBrokenTLS { _ in ["SSL_CERT_FILE": stranger.caFile] }
        try expectLeftForRetry(fake, home, run, logSays: "certificate")
    }

    @Test("a certificate for another host name: nothing sent, left for retry, logged without secrets")
    func wrongHostName() throws {
        // The emulator's certificate names 127.0.0.1 only; `localhost` reaches the same socket under another name.
        let (fake, home, run) = try recordWithBrokenTLS { fake in
            ["FCM_API_BASE_URL": "https://localhost:\(fake.port)"]
        }
        try expectLeftForRetry(fake, home, run, logSays: "localhost")
    }

    @Test("no SSL_CERT_FILE: the system store, which does not know the throwaway CA")
    func systemStoreByDefault() throws {
        let (fake, home, run) = try recordWithBrokenTLS { _ in ["SSL_CERT_FILE": nil] }
        try expectLeftForRetry(fake, home, run, logSays: "certificate")
    }

    @Test("429 QUOTA_EXCEEDED with Retry-After: 2 on one device pauses the sweep's whole batch for two seconds")
    func quotaPausesTheBatch() throws {
        let fake = try FCMFake(tls: true)
        let markers = ["QUOTA_PAUSE2", "UNAVAILABLE_ONCE", "UNAVAILABLE_ONCE", "UNAVAILABLE_ONCE"]
        let home = try DurablePushTests.home(devices: 4, markers: markers)
        // Recorded with nothing to send with (no service account): the four deliveries are due, for the sweep, whose
        // leases retry inside themselves (a recording's own send makes one attempt).
        try DurablePushTests.recordWithoutSending(home, fake)
        let (_, run) = try DurablePushTests.sweep(fake, home.database, ["PUSH_SEND_DEADLINE_MS": "15000"])
        let requests = try Self.requests(fake, tokens: home.tokens)
        let quota = try #require(requests.first { $0["status"] == .number(429) })
        let pausedFrom = Self.receivedAt(quota)
        // The other devices' retries (a 503 alone would retry after 0.25–0.5 s) waited out the pause.
        let retries = requests.filter { $0["attempt"] == .number(2) && $0["token"] != quota["token"] }
        #expect(retries.count == 3)
        for retry in retries {
            #expect(
                Self.receivedAt(retry) - pausedFrom >= 1950,
                "retried \(Self.receivedAt(retry) - pausedFrom) ms after the 429")
        }
        #expect(try DurablePushTests.deliveries(home).allSatisfy { $0.status == "SENT" })
        #expect(run.stderr.contains("push: FCM quota exceeded, sender paused"))
    }

    @Test("a sweep paused by a 429 leases its next batch only after Retry-After")
    func quotaPausesTheSweep() throws {
        let fake = try FCMFake(tls: true)
        let home = try DurablePushTests.home(devices: 4, markers: ["QUOTA_PAUSE2"])
        try DurablePushTests.recordWithoutSending(home, fake)
        // The 429 device is due first, so it is alone in the first batch of one.
        try home.database.with { connection in
            try connection.query(
                """
                UPDATE push_deliveries p SET next_attempt_at = now() - interval '1 minute'
                FROM push_devices d WHERE d.id = p.push_device_id AND d.token = \(home.tokens[0])
                """)
        }
        // A batch may last one second: the 429 device's own retry (due in two) is left for later, so only the
        // pause stands between its batch and the next.
        let (summary, _) = try DurablePushTests.sweep(
            fake, home.database, ["PUSH_SWEEP_BATCH_SIZE": "1", "PUSH_SEND_DEADLINE_MS": "1000"])
        #expect((summary?["sent"]?.integerValue ?? 0) >= 3)
        let requests = try Self.requests(fake, tokens: home.tokens)
        let quota = try #require(requests.first { $0["status"] == .number(429) })
        let others = requests.filter { $0["token"] != quota["token"] }
        #expect(others.count >= 3)
        // The sweep keeps up to two batches outstanding: one batch (of one) may go out beside the 429's, and when its
        // answer is read before the 429's, one more is leased and sent before the sender learns of the pause. Every
        // batch after those waited it out (without the pause all three others would go out at once).
        let beforePauseEnd = others.filter { Self.receivedAt($0) - Self.receivedAt(quota) < 1950 }
        #expect(beforePauseEnd.count <= 2)
        #expect(beforePauseEnd.allSatisfy { Self.receivedAt($0) - Self.receivedAt(quota) < 500 })
    }

    @Test("INVALID_ARGUMENT about the payload (BadRequest details): FAILED, the device stays enabled")
    func payloadErrorKeepsTheDevice() throws {
        let fake = try FCMFake(tls: true)
        let home = try DurablePushTests.home(devices: 2, markers: ["INVALID_PAYLOAD"])
        let run = try Executables.run(
            "dose-record", input: home.doseEvent(), environment: fake.environment(home.database))
        #expect(run.response?.statusCode == 200)
        let owed = try DurablePushTests.deliveries(home)
        #expect(owed.first { $0.token == home.tokens[0] }?.status == "FAILED")
        #expect(owed.first { $0.token == home.tokens[1] }?.status == "SENT")
        let enabled = try home.database.with { connection in
            try connection.query("SELECT is_enabled FROM push_devices WHERE token = \(home.tokens[0])").single?
                .decode(Bool.self, at: 0)
        }
        #expect(enabled == true)
    }
}

@Suite("trust store")
struct TrustStoreTests {
    @Test("SSL_CERT_FILE alone is the whole trust; with SSL_CERT_DIR both are used")
    func environmentVariables() {
        let file = TrustStore(environment: { ["SSL_CERT_FILE": "/tmp/ca.pem"][$0] }, fileExists: { _ in true })
        #expect(file.caFile == "/tmp/ca.pem" && file.caDirectory == nil && file.excludesDefaultDirectory)
        let both = TrustStore(
            environment: { ["SSL_CERT_FILE": "/tmp/ca.pem", "SSL_CERT_DIR": "/tmp/certs"][$0] },
            fileExists: { _ in true })
        #expect(both.caFile == "/tmp/ca.pem" && both.caDirectory == "/tmp/certs" && !both.excludesDefaultDirectory)
        let empty = TrustStore(environment: { ["SSL_CERT_FILE": ""][$0] }, fileExists: { _ in false })
        #expect(empty.caFile == nil && !empty.excludesDefaultDirectory)
    }

    @Test("unset: Debian's bundle, else Amazon Linux 2023's, else libcurl's own default")
    func systemBundleProbe() {
        let debian = TrustStore(environment: { _ in nil }, fileExists: { _ in true })
        #expect(debian.caFile == "/etc/ssl/certs/ca-certificates.crt")
        let amazonLinux = TrustStore(
            environment: { _ in nil }, fileExists: { $0 == "/etc/pki/tls/certs/ca-bundle.crt" })
        #expect(amazonLinux.caFile == "/etc/pki/tls/certs/ca-bundle.crt" && !amazonLinux.excludesDefaultDirectory)
        let none = TrustStore(environment: { _ in nil }, fileExists: { _ in false })
        #expect(none.caFile == nil)
    }
}

import Codecs
import Curl
import CaregiverPush
import Foundation
import Testing
import TestSupport

/// HTTP/2 fan-out that really multiplexes (docs/behaviour.md#sending): the transfers of a batch wait for a connection that can carry
/// them as streams instead of each opening its own, and a batch larger than one connection's 100 streams opens just
/// the connections it needs, all in flight at once. Checked against the FCM emulator's own count of connections
/// and against nghttpx, a TLS + HTTP/2 front that is not ours, through the built `dose-record`.
@Suite("HTTP/2 fan-out: streams of just enough connections")
struct FanOutConnectionTests {
    /// Every send arrived before the first one was answered (the emulator answers each after `delay`): they were all
    /// in flight together, not in rounds.
    ///
    /// The delay is 3 s: with both cores taken by four other busy processes, the client and the emulator got the
    /// sends of one batch across in 0.3–1.4 s, so a 1 s delay failed on a loaded machine; a second round would still
    /// arrive a whole delay after the first, and every answer still comes inside a send's 5 s timeout.
    static let answerDelay = 3000
    static func allInFlightTogether(_ requests: [JSONValue], delayMilliseconds: Double) -> Bool {
        let received = requests.map(FCMOverTLSTests.receivedAt)
        guard let first = received.min(), let last = received.max() else { return false }
        print("fan-out: \(requests.count) sends arrived within \(Int(last - first)) ms")
        return last - first < delayMilliseconds
    }

    @Test("100 devices: 100 streams of one connection")
    func hundredOnOne() throws {
        let fake = try FCMFake(delayMilliseconds: Self.answerDelay, tls: true)
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
        #expect(Self.allInFlightTogether(requests, delayMilliseconds: Double(Self.answerDelay)))
        #expect(try DurablePushTests.deliveries(home).allSatisfy { $0.status == "SENT" })
    }

    @Test("250 devices: three connections (100 + 100 + 50 streams), every send in flight at once")
    func justEnoughConnections() throws {
        let fake = try FCMFake(delayMilliseconds: Self.answerDelay, tls: true)
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
        #expect(Self.allInFlightTogether(requests, delayMilliseconds: Double(Self.answerDelay)))
        #expect(try DurablePushTests.deliveries(home).allSatisfy { $0.status == "SENT" })
    }

    @Test("a warm client's next batch reuses its connections: 1,000 requests twice open ten connections in all")
    func connectionsKeptBetweenBatches() throws {
        let fake = try FCMFake(delayMilliseconds: 200, tls: true)
        let client = try CurlClient()
        let request = CurlRequest(url: fake.baseURL + "/_emulator/fcm/stats", trust: fake.trust)
        for batch in 1...2 {
            for tag in 0..<1000 { client.schedule(request, tag: tag, timeoutMilliseconds: 10_000) }
            var answered = 0
            client.run(until: .now + .seconds(20)) { _, result in
                if case .success(let response) = result, response.status == 200 { answered += 1 }
            }
            #expect(answered == 1000, "batch \(batch)")
        }
        // libcurl's own cache limit follows the transfers still added (four each): without CURLMOPT_MAXCONNECTS the
        // first batch's last transfers close connections that the second batch then opens again.
        #expect(client.connectionsOpened == 10)
    }

    @Test("behind nghttpx (TLS + HTTP/2, not ours): 100 devices on one connection, 250 on three, all in flight")
    func behindNghttpx() throws {
        let backend = try FCMFake(delayMilliseconds: Self.answerDelay)
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
            let together = Self.allInFlightTogether(requests, delayMilliseconds: Double(Self.answerDelay))
            #expect(together, "\(devices) devices")
            #expect(try DurablePushTests.deliveries(home).allSatisfy { $0.status == "SENT" })
        }
    }
}

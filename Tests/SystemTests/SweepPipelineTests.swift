import Codecs
import CaregiverPush
import Foundation
import Testing
import TestSupport

/// `push-sweep` draining a backlog at quota speed (docs/behaviour.md#sweep): it leases the next batch while earlier sends are still
/// in flight instead of waiting for each batch, never starts more than `PUSH_SWEEP_SEND_RATE` sends a second, and
/// sends each delivery exactly once — through the built executable and the FCM emulator over TLS + HTTP/2.
@Suite("push-sweep: pipelined and paced")
struct SweepPipelineTests {
    /// The receive times (ms) of the messages addressed to `tokens`, sorted.
    static func receivedTimes(_ fake: FCMFake, tokens: Set<String>) throws -> [Double] {
        try fake.requests().filter { tokens.contains($0["token"]?.stringValue ?? "") }.map(FCMOverTLSTests.receivedAt)
            .sorted()
    }

    /// Every delivery of the database SENT, each token received exactly once.
    static func sentExactlyOnce(_ fake: FCMFake, _ database: IsolatedDatabase, tokens: Set<String>) throws -> Bool {
        let received = try fake.messages(to: tokens).compactMap { $0["token"]?.stringValue }
        let statuses = try database.with { connection in
            try connection.query("SELECT status, count(*) FROM push_deliveries GROUP BY status").map {
                "\(try $0.decode(String.self, at: 0))=\(try $0.decode(Int.self, at: 1))"
            }
        }
        return received.count == tokens.count && Set(received) == tokens && statuses == ["SENT=\(tokens.count)"]
    }

    @Test("two batches of 10 with FCM answering after a second: the second leased while the first is in flight")
    func leasesWhileSending() throws {
        let fake = try FCMFake(delayMilliseconds: 1000, tls: true)
        let database = try IsolatedDatabase()
        let (_, tokens) = try PushSweepTests.crowd(20, database: database)
        let (summary, run) = try DurablePushTests.sweep(
            fake, database, ["PUSH_SWEEP_BATCH_SIZE": "10", "PUSH_SEND_DEADLINE_MS": "5000"])
        #expect(run.result.exitStatus == 0)
        #expect(summary?["sent"] == .number(20))
        #expect(summary?["batches"] == .number(2))
        // Stop-and-wait would have sent the second batch only after the first one's answers, a second later.
        let times = try Self.receivedTimes(fake, tokens: tokens)
        #expect(times.count == 20)
        #expect((times.last ?? 0) - (times.first ?? 0) < 1000, "sends spread over \(times)")
        #expect(try Self.sentExactlyOnce(fake, database, tokens: tokens))
    }

    @Test("PUSH_SWEEP_SEND_RATE=20: a backlog of 60 is paced across the 2.9 s that rate takes; none lost")
    func rateBound() throws {
        let fake = try FCMFake(tls: true)
        let database = try IsolatedDatabase()
        let (_, tokens) = try PushSweepTests.crowd(60, database: database)
        let (summary, run) = try DurablePushTests.sweep(
            fake, database, ["PUSH_SWEEP_BATCH_SIZE": "25", "PUSH_SWEEP_SEND_RATE": "20"])
        #expect(run.result.exitStatus == 0)
        #expect(summary?["sent"] == .number(60))
        let times = try Self.receivedTimes(fake, tokens: tokens)
        #expect(times.count == 60)
        // Where each send may start is SendPacerTests' (at chosen instants: two at once, then one every 50 ms, the
        // 60th at 2.9 s); here, that the setting reaches the pacer. The stand-in sees arrivals, not starts: the first
        // ones wait for the connection's handshake and a loaded machine bunches the rest, so a one-second window of
        // arrivals can hold more than the pacer ever started in one. The whole backlog cannot arrive faster than
        // the rate lets it start, whatever the bunching: unpaced (the default rate), it arrives within milliseconds.
        let span = (times.last ?? 0) - (times.first ?? 0)
        #expect(span >= 2000, "the 60 sends arrived across \(span) ms")
        #expect(try Self.sentExactlyOnce(fake, database, tokens: tokens))
    }

    @Test("PUSH_SWEEP_SEND_RATE outside 1…10,000 is a configuration error naming the variable")
    func rateRange() {
        for bad in ["0", "10001", "fast"] {
            let configuration = Configuration(environment: ["PUSH_SWEEP_SEND_RATE": bad])
            #expect(configuration.errors.contains { $0.variable == "PUSH_SWEEP_SEND_RATE" })
            #expect(configuration.pushSweepSendRate == Configuration.defaultSweepSendRate)
        }
        #expect(Configuration(environment: ["PUSH_SWEEP_SEND_RATE": "10000"]).pushSweepSendRate == 10_000)
        #expect(Configuration.defaultSweepSendRate < 10_000)
    }
}

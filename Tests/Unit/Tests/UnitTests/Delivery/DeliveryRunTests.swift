import Codecs
import Curl
import Foundation
import Logging
import Testing

@testable import CaregiverPush

/// The send loop's decisions (docs/behaviour.md#sending), on a hand-moved clock against a scripted FCM and an
/// in-memory queue: retries and their back-off, `Retry-After`, the sender pause, the access-token re-mint, leases
/// that run out, dead tokens and the deadline. No curl, no database: each test runs in milliseconds.
@Suite("delivery run")
struct DeliveryRunTests {
    /// One run's world: its clock, FCM, queue and the re-mints it asked for.
    final class World {
        let clock = ManualClock()
        let fcm: ScriptedFCM
        let queue: InMemoryDeliveryQueue
        let sendWindow: Duration
        /// The tokens each re-mint was asked to replace.
        private(set) var reMints: [String] = []
        var reMintFails = false

        init(
            tokens: [String], sendWindow: Duration = .seconds(10),
            answer: @escaping (ScriptedFCM.Received) -> ScriptedFCM.Answer
        ) {
            self.sendWindow = sendWindow
            fcm = ScriptedFCM(clock: clock, answer: answer)
            queue = InMemoryDeliveryQueue(clock: clock, tokens: tokens, leaseDuration: sendWindow + .seconds(5))
        }

        /// A run of batches of `batchSize` whose first lease must be done by `deadline`; with `runDeadline`, a sweep's
        /// run that keeps leasing until then.
        func run(
            deadline: Duration, batchSize: Int = 500, runDeadline: Duration? = nil,
            maxAttemptsPerLease: Int = RetryPolicy.maxAttemptsPerLease, leaseSpacing: Duration? = nil
        ) -> DeliveryReport {
            var logger = Logger(label: "delivery-run")
            logger.logLevel = .critical
            let continuation = runDeadline.map {
                PushDispatcher.Continuation(
                    runDeadline: clock.at($0), minimumLeaseTime: .seconds(1),
                    pacer: SendPacer(perSecond: 8000, start: clock.now), leaseSpacing: leaseSpacing)
            }
            let run = DeliveryRun(
                transport: fcm, store: queue, clock: clock,
                settings: .init(
                    sendURL: "https://fcm.test/v1/projects/p/messages:send", trust: .process, batchSize: batchSize,
                    sendWindow: sendWindow,
                    retry: RetryPolicy(maxAttemptsPerLease: maxAttemptsPerLease, jitter: { 0 }),
                    continuation: continuation),
                accessToken: "token-1", logger: logger
            ) { rejected, _ in
                self.reMints.append(rejected)
                if self.reMintFails { throw TokenExchangeError(status: 503, error: "unavailable") }
                return "token-\(self.reMints.count + 1)"
            }
            return run.run(deadline: clock.at(deadline))
        }

        /// Milliseconds from the clock's origin to each request to `token`.
        func times(_ token: String) -> [Int] { fcm.requests(to: token).map { clock.milliseconds($0.at) } }
    }

    @Test("a 503 is retried after the back-off, and the delivery ends SENT with both attempts and no error")
    func retryAfterBackoff() throws {
        let world = World(tokens: ["a"]) { $0.previous == 0 ? .error(503, "UNAVAILABLE") : .sent() }
        let report = world.run(deadline: .seconds(5))
        #expect(report.sent == 1 && report.leased == 1 && report.leases == 1 && report.retryScheduled == 0)
        // The answer after 50 ms, then the first back-off: 0.5 s × 2⁰, its fixed half (jitter pinned at 0).
        #expect(world.times("a") == [0, 300])
        let row = try #require(world.queue.row("a"))
        #expect(row.status == "SENT" && row.attempts == 2 && row.lastError == nil)
        #expect(row.messageName == "projects/p/messages/1")
    }

    @Test("a broken connection is tried again at once, once; a second break, or no connection, waits the back-off")
    func brokenConnectionRetriedAtOnce() throws {
        // A failed send on a shared HTTP/2 connection (curl 55), then the answer.
        let once = World(tokens: ["a"]) { $0.previous == 0 ? .failure(.connectionFailed, curlCode: 55) : .sent() }
        #expect(once.run(deadline: .seconds(5), runDeadline: .seconds(5)).sent == 1)
        #expect(once.times("a") == [0, 50])
        let sent = try #require(once.queue.row("a"))
        #expect(sent.status == "SENT" && sent.attempts == 2 && sent.lastError == nil)
        // Broken twice: the second retry waits the back-off after two attempts (0.5 s × 2¹, halved).
        let twice = World(tokens: ["b"]) { $0.previous < 2 ? .failure(.connectionFailed, curlCode: 55) : .sent() }
        #expect(twice.run(deadline: .seconds(5), runDeadline: .seconds(5)).sent == 1)
        #expect(twice.times("b") == [0, 50, 600])
        // Refused (curl 7): the server is not there, and a fresh connection would not help at once.
        let refused = World(tokens: ["c"]) { $0.previous == 0 ? .failure(.connectionFailed, curlCode: 7) : .sent() }
        #expect(refused.run(deadline: .seconds(5), runDeadline: .seconds(5)).sent == 1)
        #expect(refused.times("c") == [0, 300])
        // A recording's own send makes one attempt: a broken connection leaves the delivery to the sweep.
        let recording = World(tokens: ["d"]) { _ in .failure(.connectionFailed, curlCode: 55) }
        #expect(recording.run(deadline: .seconds(5), maxAttemptsPerLease: 1).retryScheduled == 1)
        #expect(recording.times("d") == [0])
    }

    @Test("always 503: attempts spaced by a doubling back-off, five per lease, then PENDING due after the next one")
    func backoffDoublesUpToTheLeaseLimit() throws {
        let world = World(tokens: ["a"]) { _ in .error(503, "UNAVAILABLE") }
        let report = world.run(deadline: .seconds(60))
        #expect(report.retryScheduled == 1 && report.sent == 0 && report.failed == 0)
        #expect(world.times("a") == [0, 300, 850, 1900, 3950])
        let row = try #require(world.queue.row("a"))
        #expect(row.status == "PENDING" && row.attempts == 5 && row.lastError == "503 UNAVAILABLE")
        // After the fifth attempt: 0.5 s × 2⁴, halved.
        let recorded = try #require(world.queue.recordings.first?.at)
        #expect(row.nextAttemptAt - recorded == .seconds(4))
    }

    @Test("Retry-After holds the retry back; one that cannot wait for it in time goes back due after it")
    func retryAfterHonoured() throws {
        let world = World(tokens: ["a"]) { $0.previous == 0 ? .error(503, "UNAVAILABLE", retryAfter: 2) : .sent() }
        #expect(world.run(deadline: .seconds(10)).sent == 1)
        #expect(world.times("a") == [0, 2050])
        // A 503 pauses no sender, whatever its Retry-After.
        #expect(world.fcm.pausedUntil == nil)

        let late = World(tokens: ["b"]) { _ in .error(503, "UNAVAILABLE", retryAfter: 30) }
        #expect(late.run(deadline: .seconds(5)).retryScheduled == 1)
        #expect(late.times("b") == [0])
        let row = try #require(late.queue.row("b"))
        let recorded = try #require(late.queue.recordings.first?.at)
        #expect(row.status == "PENDING" && row.nextAttemptAt - recorded == .seconds(30))
    }

    @Test("a 429 with Retry-After pauses the whole sender: another device's retry waits for the pause too")
    func quotaPausesTheSender() throws {
        let world = World(tokens: ["a", "b"]) { request in
            switch (request.deviceToken, request.previous) {
            case ("a", 0): .error(429, "RESOURCE_EXHAUSTED", fcmCode: "QUOTA_EXCEEDED", retryAfter: 2)
            case ("b", 0): .error(503, "UNAVAILABLE")
            default: .sent()
            }
        }
        let report = world.run(deadline: .seconds(10))
        #expect(report.sent == 2)
        #expect(world.fcm.pausedUntil == world.clock.at(.milliseconds(2050)))
        #expect(world.times("a") == [0, 2050])
        // Its own back-off would have sent it at 300 ms.
        #expect(world.times("b") == [0, 2050])
    }

    @Test("a 429 without Retry-After backs off its own device only")
    func quotaWithoutRetryAfter() throws {
        let world = World(tokens: ["a", "b"]) { request in
            switch (request.deviceToken, request.previous) {
            case ("a", 0): .error(429, "RESOURCE_EXHAUSTED", fcmCode: "QUOTA_EXCEEDED")
            case ("b", 0): .error(503, "UNAVAILABLE")
            default: .sent()
            }
        }
        #expect(world.run(deadline: .seconds(10)).sent == 2)
        #expect(world.fcm.pausedUntil == nil)
        #expect(world.times("a") == [0, 300] && world.times("b") == [0, 300])
    }

    @Test("a pause the sender is under is waited out before leasing; one past the deadline leases nothing")
    func pauseBeforeLeasing() throws {
        let world = World(tokens: ["a"]) { _ in .sent() }
        world.fcm.throttle(until: world.clock.at(.seconds(3)))
        #expect(world.run(deadline: .seconds(2)) == DeliveryReport(skippedReason: "throttled"))
        #expect(world.queue.leases.isEmpty && world.fcm.received.isEmpty)

        #expect(world.run(deadline: .seconds(10)).sent == 1)
        #expect(world.clock.sleeps == [world.clock.at(.seconds(3))])
        #expect(world.queue.leases.map { world.clock.milliseconds($0.at) } == [3000])
        #expect(world.times("a") == [3000])
    }

    @Test("what the deadline leaves waiting behind a pause goes back to PENDING, due when the pause ends")
    func pauseOutlastsTheDeadline() throws {
        let world = World(tokens: ["a", "b"]) { request in
            request.deviceToken == "a"
                ? .error(429, "RESOURCE_EXHAUSTED", fcmCode: "QUOTA_EXCEEDED", retryAfter: 5)
                : .error(503, "UNAVAILABLE")
        }
        let report = world.run(deadline: .seconds(2))
        #expect(report.retryScheduled == 2 && report.sent == 0)
        #expect(world.times("a") == [0] && world.times("b") == [0])
        let pauseEnd = world.clock.at(.milliseconds(5050))
        let a = try #require(world.queue.row("a"))
        let b = try #require(world.queue.row("b"))
        // A back-off counts from when its lease is recorded, here the deadline: no sooner than the pause's end.
        #expect(a.status == "PENDING" && a.nextAttemptAt >= pauseEnd)
        #expect(b.status == "PENDING" && b.attempts == 1 && b.nextAttemptAt == pauseEnd)
        #expect(b.lastError == "503 UNAVAILABLE; not sent before the deadline")
    }

    @Test("a retry held behind a pause past its lease's deadline is never sent, though the sweep's run goes on")
    func pauseOutlastsTheLease() throws {
        let world = World(tokens: ["a", "b"], sendWindow: .seconds(2)) { request in
            switch (request.deviceToken, request.previous) {
            case ("a", _): .error(429, "RESOURCE_EXHAUSTED", fcmCode: "QUOTA_EXCEEDED", retryAfter: 5)
            case ("b", 0): .error(503, "UNAVAILABLE")
            default: .sent()
            }
        }
        let report = world.run(deadline: .seconds(2), runDeadline: .seconds(20))
        #expect(report.retryScheduled == 2 && report.sent == 0)
        // The lease's deadline is 2 s; the pause ends at 5.05 s.
        #expect(world.times("b") == [0])
        #expect(world.queue.row("b")?.lastError == "503 UNAVAILABLE; not sent before the deadline")
        #expect(world.queue.recordings.allSatisfy { $0.at <= world.clock.at(.seconds(2)) })
    }

    @Test("a refused access token (401) is minted again once, and every refused device is sent again with it")
    func reMintOn401() throws {
        let world = World(tokens: ["a", "b"]) { request in
            request.authorization == "Bearer token-1" ? .error(401, "UNAUTHENTICATED") : .sent()
        }
        let report = world.run(deadline: .seconds(5))
        #expect(report.sent == 2 && report.failed == 0)
        #expect(world.reMints == ["token-1"])
        for device in ["a", "b"] {
            #expect(world.fcm.requests(to: device).map(\.authorization) == ["Bearer token-1", "Bearer token-2"])
            #expect(world.queue.row(device)?.status == "SENT")
        }
    }

    @Test("a new token refused too: FAILED, with no second re-mint; a re-mint that fails: back to PENDING")
    func reMintOnlyOnce() throws {
        let world = World(tokens: ["a", "b"]) { _ in .error(401, "UNAUTHENTICATED") }
        #expect(world.run(deadline: .seconds(5)).failed == 2)
        #expect(world.reMints == ["token-1"])
        #expect(world.fcm.received.count == 4)
        #expect(world.queue.rows.allSatisfy { $0.status == "FAILED" && $0.lastError == "401 UNAUTHENTICATED" })

        let failing = World(tokens: ["c"]) { _ in .error(401, "UNAUTHENTICATED") }
        failing.reMintFails = true
        #expect(failing.run(deadline: .seconds(5)).retryScheduled == 1)
        #expect(failing.queue.row("c")?.status == "PENDING" && failing.fcm.received.count == 1)
    }

    @Test("UNREGISTERED disables the device and ends DISABLED_TOKEN at once; the other device is sent")
    func unregisteredDisablesTheDevice() throws {
        let world = World(tokens: ["dead", "alive"]) { request in
            request.deviceToken == "dead" ? .error(404, "NOT_FOUND", fcmCode: "UNREGISTERED") : .sent()
        }
        let report = world.run(deadline: .seconds(5))
        #expect(report.disabled == 1 && report.sent == 1)
        let dead = try #require(world.queue.row("dead"))
        #expect(dead.status == "DISABLED_TOKEN" && dead.attempts == 1 && dead.lastError == "404 UNREGISTERED")
        #expect(world.queue.disabledDevices == [dead.device: .unregistered])
        #expect(world.times("dead") == [0])
    }

    @Test("an answer later than its lease's deadline is not taken: PENDING, recorded before the row's lease runs out")
    func leaseRunsOutMidFlight() throws {
        // FCM would say 200 after 3 s; the lease's send deadline is 2 s away, the run's 20 s.
        let world = World(tokens: ["slow"], sendWindow: .seconds(2)) { _ in
            .response(status: 200, body: #"{"name":"projects/p/messages/late"}"#, after: .seconds(3))
        }
        let report = world.run(deadline: .seconds(2), runDeadline: .seconds(20))
        #expect(report.sent == 0 && report.retryScheduled == 1 && report.leased == 1 && report.leases == 1)
        let row = try #require(world.queue.row("slow"))
        #expect(row.status == "PENDING" && row.messageName == nil && row.lastError == "timedOut")
        // Recorded at the lease's send deadline, 5 s before the row's lease runs out.
        let recording = try #require(world.queue.recordings.first)
        #expect(recording.updated == 1 && recording.at == world.clock.at(.seconds(2)))
    }

    @Test("a lease the store refuses: the first sends nothing; a sweep's next one ends the run after what it holds")
    func refusedLeases() throws {
        let first = World(tokens: ["a", "b"]) { _ in .sent() }
        first.queue.leasesFailFrom = 0
        let skipped = first.run(deadline: .seconds(10))
        #expect(skipped.skippedReason == "lease" && skipped.sent == 0)
        #expect(first.fcm.requests(to: "a").isEmpty && first.queue.row("a")?.status == "PENDING")

        let sweep = World(tokens: ["a", "b", "c"]) { _ in .sent() }
        sweep.queue.leasesFailFrom = 1
        let report = sweep.run(deadline: .seconds(10), batchSize: 1, runDeadline: .seconds(20))
        // `a` leased and sent; the next lease refused: nothing more is leased, and the run does not ask for more.
        #expect(report.skippedReason == nil && report.leases == 1 && report.sent == 1 && !report.moreDue)
        #expect(sweep.queue.leaseCalls == 2)
        #expect(sweep.queue.row("a")?.status == "SENT")
        #expect(sweep.fcm.requests(to: "b").isEmpty && sweep.queue.row("b")?.status == "PENDING")
        #expect(sweep.queue.row("c")?.status == "PENDING")
    }

    @Test("a sweep that sends first leases again while sends are in flight, no sooner than its spacing after the last")
    func spacedLeasesWhileSending() throws {
        let world = World(tokens: ["quick", "slow"]) { request in
            request.deviceToken == "slow"
                ? .response(status: 200, body: #"{"name":"projects/p/messages/slow"}"#, after: .milliseconds(300))
                : .sent()
        }
        // Recordings queued after the run's first lease: one 10 ms in, one 60 ms in.
        world.queue.add("second", dueAt: world.clock.at(.milliseconds(10)))
        world.queue.add("third", dueAt: world.clock.at(.milliseconds(60)))
        let report = world.run(
            deadline: .seconds(5), runDeadline: .seconds(5), maxAttemptsPerLease: 1, leaseSpacing: .milliseconds(20))
        // `quick` answers at 50 ms: past the spacing, so the run leases `second` then, while `slow` is still on
        // the wire (until 300 ms); `second` answers at 100 ms and the run leases `third`; `third`'s answer at 150 ms
        // and `slow`'s at 300 ms find nothing more, and the run ends, leaving the next lease to its caller.
        #expect(world.queue.leases.map { world.clock.milliseconds($0.at) } == [0, 50, 100, 150, 300])
        #expect(world.times("second") == [50] && world.times("third") == [100])
        #expect(report.sent == 4 && report.leased == 4 && report.leases == 3)
        #expect(!report.moreDue)
        #expect(report.lastLeaseAt.map(world.clock.milliseconds) == 300)
        // Without a spacing, a short lease is the run's last: `second` and `third` wait for the next run.
        let unspaced = World(tokens: ["quick", "slow"]) { _ in .sent() }
        unspaced.queue.add("second", dueAt: unspaced.clock.at(.milliseconds(10)))
        #expect(unspaced.run(deadline: .seconds(5), runDeadline: .seconds(5), maxAttemptsPerLease: 1).sent == 2)
        #expect(unspaced.times("second").isEmpty)
    }

    @Test("a sweep's leases each have their own deadline: a slow delivery's lease ends while the run goes on")
    func leasesOfASweep() throws {
        let world = World(tokens: ["slow", "quick", "later"], sendWindow: .seconds(2)) { request in
            request.deviceToken == "slow"
                ? .response(status: 200, body: #"{"name":"projects/p/messages/late"}"#, after: .seconds(3)) : .sent()
        }
        let report = world.run(deadline: .seconds(2), batchSize: 1, runDeadline: .seconds(20))
        // `slow` and `quick` leased together at once; `later` when `quick` is done; then an empty lease ends it.
        #expect(world.queue.leases.map { world.clock.milliseconds($0.at) } == [0, 0, 50, 100])
        #expect(report.leases == 3 && report.leased == 3 && report.sent == 2 && report.retryScheduled == 1)
        #expect(!report.moreDue)
        #expect(world.queue.row("slow")?.status == "PENDING")
        // Each lease recorded on its own, as soon as its delivery is decided: `slow`'s at its deadline.
        #expect(world.queue.recordings.map { world.clock.milliseconds($0.at) } == [50, 100, 2000])
        #expect(world.queue.recordings.allSatisfy { $0.updated == 1 })
    }

    @Test("the deadline stops sending: nothing starts after it, and the delivery goes back to PENDING")
    func deadlineStopsSending() throws {
        let world = World(tokens: ["a"]) { _ in .error(503, "UNAVAILABLE") }
        let report = world.run(deadline: .seconds(1))
        #expect(report.retryScheduled == 1)
        // The third back-off (1 s) would start past the deadline.
        #expect(world.times("a") == [0, 300, 850])
        #expect(world.clock.now <= world.clock.at(.seconds(1)))
        let row = try #require(world.queue.row("a"))
        #expect(row.status == "PENDING" && row.attempts == 3)
    }

    @Test("a request still on the wire at the deadline goes back to PENDING: it may have reached FCM")
    func onTheWireAtTheDeadline() throws {
        let world = World(tokens: ["a"]) { _ in .response(status: 200, body: #"{"name":"n"}"#, after: .seconds(3)) }
        let report = world.run(deadline: .seconds(1))
        #expect(report.retryScheduled == 1 && report.sent == 0)
        #expect(world.queue.row("a")?.lastError == "deadline exceeded")
        #expect(world.clock.now == world.clock.at(.seconds(1)))
    }
}

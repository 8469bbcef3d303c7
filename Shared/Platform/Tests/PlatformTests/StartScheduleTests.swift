import Testing

@testable import Curl

/// The HTTP client's start-due rules (``StartSchedule``, what ``CurlClient`` and the unit tests' scripted FCM both
/// use) at chosen instants: no clock, no curl, no network.
@Suite("start schedule: when a queued transfer may start")
struct StartScheduleTests {
    /// Every instant is this one plus whole milliseconds.
    static let origin = ContinuousClock.now
    static func at(_ milliseconds: Int) -> ContinuousClock.Instant { origin + .milliseconds(milliseconds) }
    static let farDeadline = at(60_000)

    /// A schedule of tags with FCM's cap (100 streams a connection) and `maxConnectionsPerHost` connections.
    static func schedule(maxConnectionsPerHost: Int = 100) -> StartSchedule<Int> {
        StartSchedule(streamsPerConnection: 100, maxConnectionsPerHost: maxConnectionsPerHost)
    }

    /// What a pass decided, as text: `start 1 (900 ms)`, `start 2 (900 ms, opens)`, `refuse 3`.
    static func describe(_ verdicts: [StartSchedule<Int>.Verdict]) -> [String] {
        verdicts.map { verdict in
            switch verdict {
            case .start(let tag, let timeout, let opens): "start \(tag) (\(timeout) ms\(opens ? ", opens" : ""))"
            case .refused(let tag): "refuse \(tag)"
            }
        }
    }

    @Test("a transfer due later waits until its due instant, which is when to look again; one due now starts")
    func dueLaterAndDueNow() {
        var schedule = Self.schedule()
        schedule.add(1, due: Self.at(500), timeoutMilliseconds: 900, notAfter: nil)
        schedule.add(2, due: Self.at(0), timeoutMilliseconds: 900, notAfter: nil)
        #expect(schedule.nextLook(deadline: Self.farDeadline) == Self.at(0))
        #expect(Self.describe(schedule.pass(at: Self.at(0), deadline: Self.farDeadline)) == ["start 2 (900 ms)"])
        #expect(schedule.count == 1 && schedule.nextLook(deadline: Self.farDeadline) == Self.at(500))
        // Before its instant a pass has nothing to do.
        #expect(schedule.pass(at: Self.at(499), deadline: Self.farDeadline).isEmpty)
        #expect(Self.describe(schedule.pass(at: Self.at(500), deadline: Self.farDeadline)) == ["start 1 (900 ms)"])
        #expect(schedule.isEmpty && schedule.nextLook(deadline: Self.farDeadline) == Self.farDeadline)
    }

    @Test("notAfter: the attempt is cut to end there; one that cannot start before it is refused, never started")
    func notAfter() {
        var schedule = Self.schedule()
        schedule.add(1, due: Self.at(0), timeoutMilliseconds: 5000, notAfter: Self.at(2000))
        schedule.add(2, due: Self.at(3000), timeoutMilliseconds: 5000, notAfter: Self.at(2000))
        // Due after its notAfter: refused by the first pass that looks at it.
        #expect(
            Self.describe(schedule.pass(at: Self.at(0), deadline: Self.farDeadline)) == [
                "start 1 (2000 ms)", "refuse 2",
            ])
        schedule.add(3, due: Self.at(1000), timeoutMilliseconds: 5000, notAfter: Self.at(1500))
        schedule.add(4, due: Self.at(1800), timeoutMilliseconds: 5000, notAfter: Self.at(2500))
        #expect(schedule.nextLook(deadline: Self.farDeadline) == Self.at(1000))
        // Looked at only at its notAfter (the client was busy): refused, though it was due; the other still waits.
        #expect(Self.describe(schedule.pass(at: Self.at(1500), deadline: Self.farDeadline)) == ["refuse 3"])
        #expect(schedule.count == 1 && schedule.nextLook(deadline: Self.farDeadline) == Self.at(1800))

        // Nothing else to look at: its notAfter is when to look again, and it is refused there.
        var alone = Self.schedule()
        alone.add(5, due: Self.at(4000), timeoutMilliseconds: 5000, notAfter: Self.at(3000))
        #expect(alone.nextLook(deadline: Self.farDeadline) == Self.at(3000))
        #expect(alone.pass(at: Self.at(2999), deadline: Self.farDeadline).isEmpty)
        #expect(Self.describe(alone.pass(at: Self.at(3000), deadline: Self.farDeadline)) == ["refuse 5"])

        // Started half a millisecond before its notAfter: a 1 ms attempt, never less.
        var late = Self.schedule()
        late.add(6, due: Self.at(0), timeoutMilliseconds: 5000, notAfter: Self.at(1000))
        let justBefore = Self.origin + .microseconds(999_500)
        #expect(Self.describe(late.pass(at: justBefore, deadline: Self.farDeadline)) == ["start 6 (1 ms)"])
    }

    @Test("a pause holds back what waits and what is added later; once it ends they start, in queue order")
    func pauseInForceAndLifted() {
        var schedule = Self.schedule()
        schedule.add(1, due: Self.at(100), timeoutMilliseconds: 900, notAfter: nil)
        schedule.add(2, due: Self.at(3000), timeoutMilliseconds: 900, notAfter: nil)
        schedule.pause(until: Self.at(2000), now: Self.at(50))
        #expect(schedule.pausedUntil == Self.at(2000))
        schedule.add(3, due: Self.at(60), timeoutMilliseconds: 900, notAfter: nil)
        #expect(schedule.nextLook(deadline: Self.farDeadline) == Self.at(2000))
        // In force: nothing starts, even what was due before it.
        #expect(schedule.pass(at: Self.at(1999), deadline: Self.farDeadline).isEmpty)
        // Lifted: what it held starts; what is due after it keeps its own instant.
        #expect(
            Self.describe(schedule.pass(at: Self.at(2000), deadline: Self.farDeadline)) == [
                "start 1 (900 ms)", "start 3 (900 ms)",
            ])
        #expect(schedule.nextLook(deadline: Self.farDeadline) == Self.at(3000))

        // A pause ending before the one already asked for changes nothing.
        schedule.pause(until: Self.at(1000), now: Self.at(2500))
        #expect(schedule.pausedUntil == Self.at(2000))
        // A pause past a transfer's notAfter: it is refused there, never sent.
        schedule.add(4, due: Self.at(2500), timeoutMilliseconds: 900, notAfter: Self.at(4000))
        schedule.pause(until: Self.at(5000), now: Self.at(2500))
        #expect(schedule.nextLook(deadline: Self.farDeadline) == Self.at(4000))
        #expect(Self.describe(schedule.pass(at: Self.at(4000), deadline: Self.farDeadline)) == ["refuse 4"])
        #expect(Self.describe(schedule.pass(at: Self.at(5000), deadline: Self.farDeadline)) == ["start 2 (900 ms)"])
    }

    @Test("the run's deadline: the instant to look at the latest; reached, nothing starts and everything is refused")
    func deadlineReached() {
        var schedule = Self.schedule()
        schedule.add(1, due: Self.at(0), timeoutMilliseconds: 900, notAfter: nil)
        schedule.add(2, due: Self.at(5000), timeoutMilliseconds: 900, notAfter: nil)
        #expect(schedule.nextLook(deadline: Self.at(1000)) == Self.at(0))
        schedule.pause(until: Self.at(3000), now: Self.at(0))
        #expect(schedule.nextLook(deadline: Self.at(1000)) == Self.at(1000))
        #expect(schedule.pass(at: Self.at(999), deadline: Self.at(1000)).isEmpty)
        #expect(Self.describe(schedule.pass(at: Self.at(1000), deadline: Self.at(1000))) == ["refuse 1", "refuse 2"])
        #expect(schedule.isEmpty)
        // The pause outlives the run (a warm process keeps its client).
        #expect(schedule.pausedUntil == Self.at(3000))
    }

    @Test("stream cap: 100 streams a connection; beyond them one opener per 100, the rest wait for its handshake")
    func streamCap() {
        var schedule = Self.schedule(maxConnectionsPerHost: 3)
        for tag in 0..<250 { schedule.add(tag, due: Self.at(0), timeoutMilliseconds: 900, notAfter: nil, stream: "h") }
        // No connection yet: the first transfer opens one, the next 99 wait for its streams, the 101st opens a
        // second, the 201st a third; the rest wait.
        let first = schedule.pass(at: Self.at(0), deadline: Self.farDeadline)
        #expect(
            Self.describe(first) == [
                "start 0 (900 ms, opens)", "start 100 (900 ms, opens)", "start 200 (900 ms, opens)",
            ])
        #expect(schedule.count == 247)
        // Still connecting: nothing more starts.
        let connecting = StartSchedule<Int>.Streams(connections: 0, connecting: 3, inFlight: 3)
        #expect(schedule.pass(at: Self.at(10), deadline: Self.farDeadline, origins: ["h": connecting]).isEmpty)
        // Handshakes done: 300 streams, 3 taken; 247 start on them, none opens a connection.
        let up = StartSchedule<Int>.Streams(connections: 3, connecting: 0, inFlight: 3)
        let second = schedule.pass(at: Self.at(20), deadline: Self.farDeadline, origins: ["h": up])
        #expect(second.count == 247 && Self.describe(second).allSatisfy { !$0.contains("opens") })
        #expect(schedule.isEmpty)

        // Every connection the host allows is full: the next waits for a stream to come free.
        var full = Self.schedule(maxConnectionsPerHost: 1)
        full.add(1, due: Self.at(0), timeoutMilliseconds: 900, notAfter: nil, stream: "h")
        let busy = StartSchedule<Int>.Streams(connections: 1, connecting: 0, inFlight: 100)
        #expect(full.pass(at: Self.at(0), deadline: Self.farDeadline, origins: ["h": busy]).isEmpty)
        #expect(full.count == 1)
        var freed = busy
        freed.inFlight = 99
        #expect(
            Self.describe(full.pass(at: Self.at(1), deadline: Self.farDeadline, origins: ["h": freed])) == [
                "start 1 (900 ms)"
            ])
    }

    @Test("no cap for a transfer that is no stream, nor on an origin that answered over HTTP/1.1")
    func noStreamCap() {
        var schedule = Self.schedule(maxConnectionsPerHost: 1)
        for tag in 0..<3 { schedule.add(tag, due: Self.at(0), timeoutMilliseconds: 900, notAfter: nil) }
        for tag in 3..<6 { schedule.add(tag, due: Self.at(0), timeoutMilliseconds: 900, notAfter: nil, stream: "h1") }
        let http1 = StartSchedule<Int>.Streams(multiplexes: false, connections: 1, connecting: 0, inFlight: 1)
        #expect(schedule.pass(at: Self.at(0), deadline: Self.farDeadline, origins: ["h1": http1]).count == 6)
    }

    @Test("what is added after a pass (a completion's retry) waits behind what was already waiting")
    func queueOrder() {
        var schedule = Self.schedule()
        schedule.add(1, due: Self.at(100), timeoutMilliseconds: 900, notAfter: nil)
        schedule.add(2, due: Self.at(0), timeoutMilliseconds: 900, notAfter: nil)
        _ = schedule.pass(at: Self.at(0), deadline: Self.farDeadline)
        schedule.add(3, due: Self.at(0), timeoutMilliseconds: 900, notAfter: nil)
        #expect(
            Self.describe(schedule.pass(at: Self.at(100), deadline: Self.farDeadline)) == [
                "start 1 (900 ms)", "start 3 (900 ms)",
            ])
    }
}

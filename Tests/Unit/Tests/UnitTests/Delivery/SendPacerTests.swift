import Testing

@testable import CaregiverPush

/// `push-sweep`'s pacing (`PUSH_SWEEP_SEND_RATE`) at chosen instants: where each send may start, from the instants
/// it is asked at, no clock read. The system test (`SweepPipelineTests`) checks only that the setting reaches it.
@Suite("send pacer")
struct SendPacerTests {
    /// The starts, from `start`, of `count` sends all due at `start` (a backlog leased at once).
    static func backlogStarts(rate: Int, count: Int, start: ContinuousClock.Instant) -> [Duration] {
        let pacer = SendPacer(perSecond: rate, start: start)
        return (0..<count).map { _ in pacer.slot(notBefore: start) - start }
    }

    /// The most starts within any `window` (starts in order).
    static func mostWithin(_ window: Duration, _ starts: [Duration]) -> Int {
        var most = 0
        var first = 0
        for (last, start) in starts.enumerated() {
            while start - starts[first] >= window { first += 1 }
            most = max(most, last - first + 1)
        }
        return most
    }

    @Test("a backlog at 20 a second: two at once, then one every 50 ms; never more than 22 starts in any second")
    func twentyASecond() {
        let starts = Self.backlogStarts(rate: 20, count: 60, start: .now)
        #expect(Array(starts.prefix(4)) == [.zero, .zero, .milliseconds(50), .milliseconds(100)])
        #expect(starts.last == .milliseconds(2900))
        #expect(Self.mostWithin(.seconds(1), starts) == 21)
    }

    @Test(
        "any rate: a tenth of a second's worth at once (at least one), then one per interval; at most the rate plus that in any second",
        arguments: [1, 10, 20, 100, 8000])
    func anyRate(rate: Int) {
        let count = rate * 3
        let starts = Self.backlogStarts(rate: rate, count: count, start: .now)
        let atOnce = max(rate / 10, 1)
        let interval = Duration.seconds(1) / rate
        #expect(starts.prefix(atOnce).allSatisfy { $0 == .zero })
        #expect(starts[atOnce] == interval)
        #expect(starts.last == interval * (count - atOnce))
        #expect(Self.mostWithin(.seconds(1), starts) <= rate + atOnce)
        #expect(zip(starts, starts.dropFirst()).allSatisfy { $0 <= $1 })
    }

    @Test("a send due later starts when due, and time left unused earns no more than the burst")
    func idleTime() {
        let start = ContinuousClock.now
        let pacer = SendPacer(perSecond: 20, start: start)
        let later = start + .seconds(5)
        #expect(pacer.slot(notBefore: later) == later)
        let next = (0..<3).map { _ in pacer.slot(notBefore: later) - start }
        #expect(next == [.seconds(5), .milliseconds(5050), .milliseconds(5100)])
    }
}

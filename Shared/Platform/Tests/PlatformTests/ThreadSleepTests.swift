import Codecs
import Testing

/// The one blocking sleep of the synchronous functions (the Runtime API's back-off, a 429's pause, the conflict
/// retry's pause): it blocks at least as long as asked.
@Suite("ThreadSleep")
struct ThreadSleepTests {
    @Test("sleep(for:) and sleep(until:) block the thread at least as long as asked", arguments: [1, 30, 120])
    func blocksAtLeast(milliseconds: Int) {
        let asked = Duration.milliseconds(milliseconds)
        let start = ContinuousClock.now
        ThreadSleep.sleep(for: asked)
        #expect(ContinuousClock.now - start >= asked)
        let until = ContinuousClock.now + asked
        ThreadSleep.sleep(until: until)
        #expect(ContinuousClock.now >= until)
    }
}

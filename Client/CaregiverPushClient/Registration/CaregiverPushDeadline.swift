import Foundation

/// Waits for main-actor work at most a given time, whether or not the work stops when cancelled: at the deadline
/// the caller goes on and the work is cancelled (it may still run to its end, unobserved).
@MainActor
enum CaregiverPushDeadline {
    enum Outcome<Value: Sendable>: Sendable {
        case finished(Value)
        case timedOut
    }

    static func run<Value: Sendable>(
        seconds: TimeInterval, _ work: @escaping @MainActor () async -> Value
    ) async -> Outcome<Value> {
        let race = Race<Value>()
        let worker = Task { @MainActor in race.settle(.finished(await work())) }
        let timer = Task { @MainActor in
            do { try await Task.sleep(for: .milliseconds(Int(seconds * 1000))) } catch { return }
            race.settle(.timedOut)
        }
        let outcome = await race.outcome()
        worker.cancel()
        timer.cancel()
        return outcome
    }

    /// The first of the work and the timer to settle; the other is ignored.
    private final class Race<Value: Sendable> {
        private var settled: Outcome<Value>?
        private var waiter: CheckedContinuation<Outcome<Value>, Never>?

        func settle(_ outcome: Outcome<Value>) {
            guard settled == nil else { return }
            settled = outcome
            waiter?.resume(returning: outcome)
            waiter = nil
        }

        func outcome() async -> Outcome<Value> {
            if let settled { return settled }
            return await withCheckedContinuation { waiter = $0 }
        }
    }
}

import ProcessSupervision
import Synchronization

/// The function processes still running (a cold process finishing its push after its response), so that a
/// shutdown can wait for them and kill what outlives the grace period.
final class ProcessTracker: Sendable {
    private let processes = Mutex<[Int32: FunctionProcess]>([:])

    func add(_ process: FunctionProcess) { processes.withLock { $0[process.pid] = process } }
    func remove(_ process: FunctionProcess) { _ = processes.withLock { $0.removeValue(forKey: process.pid) } }
    var count: Int { processes.withLock { $0.count } }
    func killAll() { for process in processes.withLock({ Array($0.values) }) { process.kill() } }
}

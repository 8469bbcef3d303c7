import Dispatch
import Foundation

/// Runs `body`, which blocks (a pipe read to EOF, a write to a child's stdin), on a thread of its own.
///
/// Not on `DispatchQueue.global()`: libdispatch sizes that pool to the cores and adds a thread only about once a
/// second while all of them are blocked. Ten warm workers held twenty such reads for their whole life, so on two
/// cores the runner's first request waited some fifteen seconds for the pool to grow (found by the load test).
/// The runner's processes no longer need it (swift-subprocess reads their pipes); the synchronous
/// `ChildProcess.run` of the tests and benchmarks still does.
func blockingThread(group: DispatchGroup? = nil, _ body: @escaping @Sendable () -> Void) {
    group?.enter()
    let thread = Thread {
        body()
        group?.leave()
    }
    thread.stackSize = 256 * 1024
    thread.start()
}

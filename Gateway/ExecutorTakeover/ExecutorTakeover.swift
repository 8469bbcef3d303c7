import CExecutorHook
import NIOCore
import NIOPosix

/// NIO's event loops as Swift's global executor, in every build of the hosts (docs/decisions.md#one-executor).
package enum ExecutorTakeover {
    /// The runtime's hook: called with each job enqueued on the global executor, and the runtime's own enqueue.
    private typealias Hook = @convention(thin) (UnownedJob, @convention(thin) (UnownedJob) -> Void) -> Void

    /// Makes `MultiThreadedEventLoopGroup.singleton` Swift's global executor; call once, first thing, from the main
    /// thread. NIO's own installer finds the runtime's hook with `dlsym`; where that fails because the runtime is
    /// linked in statically (the image's gateway), the hook is set at the address the linker resolved. Returns
    /// whether the event loops now run the tasks.
    package static func install() -> Bool {
        if NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor() { return true }
        // Another hook is installed already: leave it.
        guard let slot = caregiver_push_enqueue_global_hook().map(UnsafeMutableRawPointer.init),
            slot.load(as: UnsafeRawPointer?.self) == nil
        else { return false }
        let hook: Hook = { job, _ in
            // `any()` stays on the current event loop when called from one: no thread hop for a task's own jobs.
            MultiThreadedEventLoopGroup.singleton.any().enqueue(ExecutorJob(job))
        }
        withUnsafeBytes(of: hook) { bytes in
            slot.copyMemory(from: bytes.baseAddress!, byteCount: MemoryLayout<UnsafeRawPointer>.size)
        }
        return true
    }
}

import CTestSupport
import Foundation
import ProcessSupervision
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Many short-lived children started at the same moment, each with its own bytes on stdin: a burst of cold
/// invocations, for the tests and benchmarks that need hundreds at once.
///
/// ``ChildProcess`` (Foundation's `Process`) is not fit for that: `Process.run()` called from 200 threads at once
/// crashes inside Foundation, and its pipe reads die on `EINTR` while children exit around them. This spawns with
/// `posix_spawn` (close-on-exec pipes, so no child holds another's), reads with `poll` and retries what a signal
/// interrupts.
package enum ProcessBurst {
    /// What a burst did.
    package struct Outcome: Sendable {
        /// When every child was let go (each is spawned by its own thread from then on).
        package let released: ContinuousClock.Instant
        /// One result per input, in order; a child that could not be started has exit status -1.
        package let results: [ChildProcess.Result]

        /// Per child, from the release until its stdout closed (its response was complete), in milliseconds.
        package var responseMilliseconds: [Double] {
            results.map { result in
                let elapsed = result.standardOutputClosedAt - released
                return Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
            }
        }
    }

    /// Runs `executable` once per input, all released together once every thread is ready, and waits for all.
    package static func run(
        executable: URL, arguments: [String] = [], environment: [String: String], inputs: [[UInt8]]
    ) -> Outcome {
        signal(SIGPIPE, SIG_IGN)
        let results = Mutex<[Int: ChildProcess.Result]>([:])
        let ready = DispatchGroup()
        let gate = DispatchGroup()
        let done = DispatchGroup()
        gate.enter()
        for (index, input) in inputs.enumerated() {
            ready.enter()
            done.enter()
            let thread = Thread {
                ready.leave()
                gate.wait()
                let result = runOne(
                    executable: executable.path, arguments: arguments, environment: environment, input: input)
                results.withLock { $0[index] = result }
                done.leave()
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
        ready.wait()
        let released = ContinuousClock.now
        gate.leave()
        done.wait()
        return Outcome(released: released, results: results.withLock { all in inputs.indices.map { all[$0]! } })
    }

    private static func runOne(
        executable: String, arguments: [String], environment: [String: String], input: [UInt8]
    ) -> ChildProcess.Result {
        let started = ContinuousClock.now
        func failed() -> ChildProcess.Result {
            ChildProcess.Result(
                exitStatus: -1, standardOutput: Data(), standardError: Data(), standardOutputClosedAt: started,
                exitedAt: started, standardOutputClosedAtDate: Date(), exitedAtDate: Date())
        }
        var stdinPipe: [Int32] = [-1, -1]
        var stdoutPipe: [Int32] = [-1, -1]
        var stderrPipe: [Int32] = [-1, -1]
        guard caregiver_push_pipe_cloexec(&stdinPipe) == 0 else { return failed() }
        guard caregiver_push_pipe_cloexec(&stdoutPipe) == 0 else {
            stdinPipe.forEach { _ = close($0) }
            return failed()
        }
        guard caregiver_push_pipe_cloexec(&stderrPipe) == 0 else {
            (stdinPipe + stdoutPipe).forEach { _ = close($0) }
            return failed()
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // dup2 clears close-on-exec on the copies: the child keeps exactly 0, 1 and 2.
        posix_spawn_file_actions_adddup2(&actions, stdinPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, stdoutPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, stderrPipe[1], 2)
        // The child starts as from a shell: no blocked signals (a worker thread's mask would otherwise carry over)
        // and SIGPIPE back to its default (this process ignores it).
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        _ = close(stdinPipe[0])
        _ = close(stdoutPipe[1])
        _ = close(stderrPipe[1])
        guard spawned == 0 else {
            [stdinPipe[1], stdoutPipe[0], stderrPipe[0]].forEach { _ = close($0) }
            return failed()
        }
        // Events are small; a child that exits without reading makes this fail (EPIPE), which is its business.
        var offset = 0
        while offset < input.count {
            let written = input[offset...].withUnsafeBytes { write(stdinPipe[1], $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            if written <= 0 { break }
            offset += written
        }
        _ = close(stdinPipe[1])

        var output: [UInt8] = []
        var errors: [UInt8] = []
        var outputClosedAt = started
        var outputClosedAtDate = Date()
        var open = [stdoutPipe[0], stderrPipe[0]]
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while !open.isEmpty {
            var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&fds, nfds_t(fds.count), -1)
            if ready < 0 {
                if errno == EINTR { continue }
                break
            }
            for entry in fds where entry.revents != 0 {
                let count = buffer.withUnsafeMutableBytes { read(entry.fd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count > 0 {
                    if entry.fd == stdoutPipe[0] {
                        output += buffer[0..<count]
                    } else {
                        errors += buffer[0..<count]
                    }
                    continue
                }
                if entry.fd == stdoutPipe[0] {
                    outputClosedAt = .now
                    outputClosedAtDate = Date()
                }
                _ = close(entry.fd)
                open.removeAll { $0 == entry.fd }
            }
        }
        open.forEach { _ = close($0) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exitedAt = ContinuousClock.now
        // WIFEXITED / WEXITSTATUS, which Swift does not import; a signal is reported as 128 + its number.
        let exitStatus = status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        return ChildProcess.Result(
            exitStatus: exitStatus, standardOutput: Data(output), standardError: Data(errors),
            standardOutputClosedAt: outputClosedAt, exitedAt: exitedAt, standardOutputClosedAtDate: outputClosedAtDate,
            exitedAtDate: Date())
    }
}

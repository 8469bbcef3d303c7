import Codecs
import CaregiverPush
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The start-up section's process harness: `posix_spawn` with the whole input already waiting in the stdin pipe, a
/// `poll` loop on stdout and stderr, and `wait4` for the exit status. The same code path for the functions and for the
/// C floors, with nothing in it that costs more for one than for the other (no Foundation `Process`, whose exit
/// notification and helper threads would add the same noise to both). The peak resident set comes from a run through
/// `c/peak-rss` (see there why `wait4` here cannot give it).
enum Spawn {
    struct Outcome {
        let exitStatus: Int32
        let standardOutput: [UInt8]
        let standardError: [UInt8]
        /// Just before `posix_spawn`.
        let started: ContinuousClock.Instant
        /// When the child's stdout reached EOF (its response is complete).
        let standardOutputClosed: ContinuousClock.Instant
        /// What `wait4` says of the child, when run through `c/peak-rss`.
        let usage: Usage?

        /// Start to stdout's EOF, in milliseconds.
        var milliseconds: Double { benchMilliseconds(standardOutputClosed - started) }

        /// The response's `statusCode`, when stdout holds a response document.
        var statusCode: Int64? { (try? JSONValue.parse(standardOutput))?["statusCode"]?.integerValue }
    }

    /// A child's resource usage as `c/peak-rss` reports it.
    struct Usage {
        let peakResidentKilobytes: Int
        let userMicroseconds: Int
        let systemMicroseconds: Int
        let minorFaults: Int
        let majorFaults: Int

        /// `peak-rss-kib=N user-us=N system-us=N minor-faults=N major-faults=N`
        init?(_ line: Substring) {
            var fields: [String: Int] = [:]
            for field in line.split(separator: " ") {
                let parts = field.split(separator: "=")
                if parts.count == 2, let value = Int(parts[1]) { fields[String(parts[0])] = value }
            }
            guard let peak = fields["peak-rss-kib"], let user = fields["user-us"], let system = fields["system-us"],
                let minor = fields["minor-faults"], let major = fields["major-faults"]
            else { return nil }
            (peakResidentKilobytes, userMicroseconds, systemMicroseconds, minorFaults, majorFaults) =
                (peak, user, system, minor, major)
        }
    }

    /// A child left running (a Lambda runtime looping on the Runtime API); ``stop()`` kills and reaps it.
    struct Running {
        let pid: pid_t
        let started: ContinuousClock.Instant
        let standardErrorFile: String

        /// Sends `signal` (SIGKILL by default), reaps, and returns what the process wrote on stderr.
        @discardableResult
        func stop(signal: Int32 = SIGKILL) -> String {
            kill(pid, signal)
            _ = Spawn.reap(pid)
            let text = (try? String(contentsOfFile: standardErrorFile, encoding: .utf8)) ?? ""
            unlink(standardErrorFile)
            return text
        }
    }

    /// Runs `executable` with `input` on stdin and waits for it to exit; through `peakResidentHelper` (`c/peak-rss`)
    /// when given, which then reports the peak resident set (and adds its own fork to the time).
    static func run(
        executable: String, environment: [String: String], input: [UInt8], peakResidentHelper: String? = nil,
        spawned: (pid_t) -> Void = { _ in }
    ) throws -> Outcome {
        // The whole input is written before the child starts: it must fit in the pipe (64 KiB by default).
        guard input.count < 60_000 else { throw BenchmarkError("spawn: input too large for the pipe") }
        signal(SIGPIPE, SIG_IGN)
        let stdin = try pipeDescriptors()
        let stdout = try pipeDescriptors()
        let stderr = try pipeDescriptors()
        var written = 0
        while written < input.count {
            let count = input[written...].withUnsafeBytes { write(stdin.write, $0.baseAddress, $0.count) }
            guard count > 0 else { throw BenchmarkError("spawn: writing stdin failed (\(errno))") }
            written += count
        }
        close(stdin.write)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdin.read, 0)
        posix_spawn_file_actions_adddup2(&actions, stdout.write, 1)
        posix_spawn_file_actions_adddup2(&actions, stderr.write, 2)
        let started = ContinuousClock.now
        let pid = try spawn(
            peakResidentHelper ?? executable, arguments: peakResidentHelper == nil ? [] : [executable],
            environment: environment, actions: &actions)
        spawned(pid)
        close(stdin.read)
        close(stdout.write)
        close(stderr.write)

        var output: [UInt8] = []
        var errors: [UInt8] = []
        var outputClosed: ContinuousClock.Instant?
        var open = [stdout.read, stderr.read]
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while !open.isEmpty {
            var descriptors = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            if poll(&descriptors, nfds_t(descriptors.count), -1) < 0 {
                if errno == EINTR { continue }
                throw BenchmarkError("spawn: poll failed (\(errno))")
            }
            for descriptor in descriptors where descriptor.revents != 0 {
                let count = chunk.withUnsafeMutableBytes { read(descriptor.fd, $0.baseAddress, $0.count) }
                if count > 0 {
                    if descriptor.fd == stdout.read {
                        output += chunk[..<count]
                    } else {
                        errors += chunk[..<count]
                    }
                } else if count == 0 || errno != EINTR {
                    if descriptor.fd == stdout.read { outputClosed = ContinuousClock.now }
                    close(descriptor.fd)
                    open.removeAll { $0 == descriptor.fd }
                }
            }
        }
        let status = reap(pid)
        var usage: Usage?
        if peakResidentHelper != nil {
            let text = String(decoding: errors, as: UTF8.self)
            if let range = text.range(of: "\npeak-rss-kib=", options: .backwards) {
                usage = Usage(text[text.index(after: range.lowerBound)...].prefix { $0 != "\n" })
                errors = Array(text[..<range.lowerBound].utf8)
            }
        }
        return Outcome(
            exitStatus: status, standardOutput: output, standardError: errors, started: started,
            standardOutputClosed: outputClosed ?? ContinuousClock.now, usage: usage)
    }

    /// Starts `executable` with stdin and stdout on /dev/null and stderr in a temporary file, and leaves it running.
    static func start(executable: String, arguments: [String] = [], environment: [String: String]) throws -> Running {
        let standardErrorFile = NSTemporaryDirectory() + "bench-runtime-\(UUID().uuidString).log"
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, standardErrorFile, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let started = ContinuousClock.now
        let pid = try spawn(executable, arguments: arguments, environment: environment, actions: &actions)
        return Running(pid: pid, started: started, standardErrorFile: standardErrorFile)
    }

    private static func spawn(
        _ executable: String, arguments: [String], environment: [String: String],
        actions: inout posix_spawn_file_actions_t
    ) throws -> pid_t {
        let arguments: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let variables: [UnsafeMutablePointer<CChar>?] =
            environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            arguments.forEach { free($0) }
            variables.forEach { free($0) }
        }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, executable, &actions, nil, arguments, variables)
        guard status == 0 else { throw BenchmarkError("spawn: posix_spawn \(executable) failed (\(status))") }
        return pid
    }

    /// A pipe whose two ends are closed on exec (the child gets only the ends dup'ed onto 0, 1 and 2).
    private static func pipeDescriptors() throws -> (read: Int32, write: Int32) {
        var descriptors: [Int32] = [0, 0]
        guard pipe(&descriptors) == 0 else { throw BenchmarkError("spawn: pipe failed (\(errno))") }
        for descriptor in descriptors { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        return (descriptors[0], descriptors[1])
    }

    /// `waitpid`: the exit status (128 + signal when killed).
    fileprivate static func reap(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
    }
}

func benchMilliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

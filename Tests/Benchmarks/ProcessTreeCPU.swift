import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// CPU time of running processes to the nanosecond, read from procfs: each thread's `schedstat` (time on a CPU, in
/// ns), summed. `/proc/PID/stat`'s utime and stime count 10 ms ticks, too coarse for one request. A tree's figure
/// also holds what its processes that have exited used: each live process's `cutime` and `cstime` (the children it
/// has reaped, theirs included), in ticks — PostgreSQL's backends and autovacuum workers come and go during a run,
/// and a process gone between two readings would otherwise take its CPU with it.
enum ProcessTreeCPU {
    /// Milliseconds of CPU that process `pid` has used so far, all its threads together (0 once it is gone).
    static func milliseconds(_ pid: pid_t) -> Double {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.reduce(0.0) { total, task in
            let text = procText("/proc/\(pid)/task/\(task)/schedstat")
            return total + (text.split(separator: " ").first.flatMap { Double($0) } ?? 0) / 1e6
        }
    }

    /// The processes whose parent is `pid`, and theirs, down the tree.
    static func descendants(of pid: pid_t) -> [pid_t] {
        var parents: [pid_t: [pid_t]] = [:]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let child = pid_t(entry) else { continue }
            // `pid (comm) state ppid …`: the command may hold spaces and parentheses, so read after its last ')'.
            let stat = procText("/proc/\(child)/stat")
            guard let close = stat.lastIndex(of: ")") else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, let parent = pid_t(fields[1]) { parents[parent, default: []].append(child) }
        }
        var found: [pid_t] = []
        var pending = parents[pid] ?? []
        while let next = pending.popLast() {
            found.append(next)
            pending += parents[next] ?? []
        }
        return found
    }

    /// Milliseconds of CPU of `pid` and of its descendants at this moment, apart; the descendants' share holds what
    /// the exited ones used, as reaped by `pid` or by a descendant still running.
    static func tree(_ pid: pid_t) -> (root: Double, descendants: Double) {
        let live = descendants(of: pid)
        return (
            milliseconds(pid),
            live.reduce(reapedMilliseconds(pid)) { $0 + milliseconds($1) + reapedMilliseconds($1) }
        )
    }

    /// Milliseconds of CPU that the children `pid` has waited for used, with the ones they waited for: `cutime` and
    /// `cstime` of `/proc/PID/stat` (fields 16 and 17), in clock ticks.
    static func reapedMilliseconds(_ pid: pid_t) -> Double {
        let stat = procText("/proc/\(pid)/stat")
        guard let close = stat.lastIndex(of: ")") else { return 0 }
        // After the command: field 3 (state) is the first, so field N is at N - 3.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 14, let children = Double(fields[13]), let system = Double(fields[14]) else { return 0 }
        return (children + system) * 1000 / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// A procfs file's text, read to EOF with read(2) (procfs reports a size of 0).
    private static func procText(_ path: String) -> String {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { return "" }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

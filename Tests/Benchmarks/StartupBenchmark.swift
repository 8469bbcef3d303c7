import Codecs
import JOSE
import Libpq
import Migrations
import ProcessSupervision
import TestSupport
import CaregiverPush
import Foundation
import Logging

/// Start-up against C, for functions built without full Foundation: the functions `make release` ships (each zip's
/// `bootstrap`, run from the unzipped folder so that its bundled `lib/` is what loads) against C programs the bench
/// builds from Tests/Benchmarks/c (cc -O2, linked dynamically against the system's libpq and libcurl). Every figure is
/// a ratio of medians measured in one run, the two sides interleaved run by run, through one harness (``Spawn``).
struct StartupBenchmark {
    /// `<function>/bootstrap` (and `lib/`) for each function: the unzipped `dist/lambda/<function>.zip`.
    let lambdaDirectory: URL
    /// The zips themselves (`dist/lambda`).
    let zipDirectory: URL
    /// `trivial`, `register` and `runtime`, built by scripts/bench.sh from Tests/Benchmarks/c.
    let floorDirectory: URL
    let databaseURL: String
    let secret = String(repeating: "c", count: 40)

    /// The function list, infra/functions.json (the benchmark runs from the repository root, as scripts/bench.sh does).
    static let functions: [String] = {
        guard let table = try? FunctionTable(contentsOf: URL(fileURLWithPath: "infra/functions.json")) else {
            fatalError("bench: infra/functions.json is unreadable; run from the repository root")
        }
        return table.functions.map(\.name)
    }()

    struct Pair {
        let ours: Double
        let floor: Double
        let runs: Int
        /// The earlier rounds' floor (`*-unverified`: the token's `sub` decoded, not checked), measured in the same
        /// interleaved loop, when there is one.
        var earlierFloor: Double? = nil
        var ratio: Double { ours / floor }
        var earlierRatio: Double? { earlierFloor.map { ours / $0 } }
    }

    /// The earlier floor beside `name` (`register-unverified`), when scripts/bench.sh built it.
    func earlierFloor(_ name: String) -> String? {
        let path = floor("\(name)-unverified")
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }

    var environment: [String: String] {
        BenchSeed.functionEnvironment(databaseURL: databaseURL, secret: secret, emulator: nil)
    }

    func bootstrap(_ function: String) -> String {
        lambdaDirectory.appendingPathComponent(function).appendingPathComponent("bootstrap").path
    }

    func floor(_ name: String) -> String { floorDirectory.appendingPathComponent(name).path }

    /// A push-register event from a caregiver with a valid HS256 session: a new device token unless one is given.
    func registerEvent(caregiver: UUID = UUID(), token: String? = nil, installationID: String? = nil) throws -> [UInt8]
    {
        let session = try JWTSigner.sign(
            claims: [
                "sub": .string(caregiver.uuidString.lowercased()), "aud": .string("authenticated"),
                "role": .string("authenticated"), "exp": .number(Date().timeIntervalSince1970 + 3600),
            ],
            using: .hmac(secret: Array(secret.utf8)))
        let installation = installationID.map { #","installationId":"\#($0)""# } ?? ""
        let device = token ?? "bench-startup-\(UUID().uuidString)"
        let body = #"{"token":"\#(device)","platform":"ios","environment":"DEV"\#(installation)}"#
        return Array(try BenchSeed.post("/api/push/register", bearer: session, body: body))
    }

    /// (a) Cold push-register through stdin until stdout's EOF against `c/register`, the same event for both.
    func coldStdin(event: [UInt8], runs: Int) throws -> Pair {
        try interleaved(
            runs: runs, ours: bootstrap("push-register"), floor: floor("register"), earlier: earlierFloor("register")
        ) { executable in
            let outcome = try Spawn.run(executable: executable, environment: environment, input: event)
            try expect(outcome, status: 200, executable)
            return outcome.milliseconds
        }
    }

    /// (c) Empty stdin (push-register answers a 400 problem) against the trivial C program, dynamic and static.
    func startupAlone(runs: Int, staticTrivial: String?) throws -> (dynamic: Pair, staticFloor: Pair?) {
        let run = { (executable: String) throws -> Double in
            let outcome = try Spawn.run(executable: executable, environment: environment, input: [])
            if executable == bootstrap("push-register") { try expect(outcome, status: 400, executable) }
            return outcome.milliseconds
        }
        let dynamic = try interleaved(runs: runs, ours: bootstrap("push-register"), floor: floor("trivial"), run)
        let staticFloor = try staticTrivial.map {
            try interleaved(runs: runs, ours: bootstrap("push-register"), floor: $0, run)
        }
        return (dynamic, staticFloor)
    }

    /// (b) As a Lambda custom runtime: process start → first response posted, a new process (and a new local
    /// Runtime API connection) per run, the event waiting before the process starts.
    func runtimeCold(event: [UInt8], runs: Int) throws -> Pair {
        let api = try LocalRuntimeAPI(functionName: "push-register")
        defer { api.stop() }
        return try interleaved(
            runs: runs, ours: bootstrap("push-register"), floor: floor("runtime"), earlier: earlierFloor("runtime")
        ) { executable in
            let id = api.enqueue(event)
            let process = try Spawn.start(
                executable: executable, environment: environment.merging(["AWS_LAMBDA_RUNTIME_API": api.address]) { $1 }
            )
            let answer: LocalRuntimeAPI.Answer
            do {
                answer = try api.answer(id, timeout: .seconds(30))
            } catch {
                throw BenchmarkError("\(executable) as a runtime: \(error) — stderr: \(process.stop())")
            }
            process.stop()
            try expect(answer, executable)
            return benchMilliseconds(answer.posted - process.started)
        }
    }

    /// One cold-start lever: push-register built with that lever changed (`variant`, a `bootstrap` beside the shipped
    /// one's `lib/`) against the shipped bootstrap, cold through stdin to stdout's EOF, alternated run by run; and
    /// what the loader must do for each (file size, relative relocations from `readelf -d`'s `RELACOUNT`).
    struct Lever {
        let name: String
        let timing: Pair
        let bytes: (variant: Int, shipped: Int)
        let relativeRelocations: (variant: String, shipped: String)
        /// Instructions of one registration under callgrind (exact, unlike the milliseconds), when valgrind is there.
        let instructions: (variant: Int, shipped: Int)?
    }

    /// Instructions of one run of `executable` with `input` on stdin, counted by `valgrind --tool=callgrind`.
    func instructions(_ executable: String, input: [UInt8]) -> Int? {
        let output = NSTemporaryDirectory() + "bench-lever-\(UUID().uuidString).callgrind"
        defer { unlink(output) }
        guard
            let result = try? ChildProcess.run(
                executable: URL(fileURLWithPath: "/usr/bin/env"),
                arguments: ["valgrind", "--tool=callgrind", "--callgrind-out-file=\(output)", executable],
                environment: environment, input: Data(input)),
            result.exitStatus == 0, let text = try? String(contentsOfFile: output, encoding: .utf8)
        else { return nil }
        return text.split(separator: "\n").first { $0.hasPrefix("summary:") }.flatMap {
            Int($0.dropFirst("summary:".count).trimmingCharacters(in: .whitespaces))
        }
    }

    func lever(_ name: String, variant: String, event: [UInt8], runs: Int) throws -> Lever {
        let shipped = bootstrap("push-register")
        let timing = try interleaved(runs: runs, ours: variant, floor: shipped) { executable in
            let outcome = try Spawn.run(executable: executable, environment: environment, input: event)
            try expect(outcome, status: 200, executable)
            return outcome.milliseconds
        }
        let counted = instructions(variant, input: event).flatMap { variant in
            instructions(shipped, input: event).map { (variant, $0) }
        }
        return Lever(
            name: name, timing: timing,
            bytes: (Self.fileSize(variant) ?? 0, Self.fileSize(shipped) ?? 0),
            relativeRelocations: (Self.relativeRelocations(variant), Self.relativeRelocations(shipped)),
            instructions: counted)
    }

    /// The relative relocations the loader applies before `main`: `RELACOUNT` of the dynamic section, or, packed as
    /// DT_RELR, the size of that table.
    static func relativeRelocations(_ executable: String) -> String {
        guard
            let result = try? ChildProcess.run(
                executable: URL(fileURLWithPath: "/usr/bin/env"), arguments: ["readelf", "-d", executable],
                input: Data())
        else { return "?" }
        let lines = String(decoding: result.standardOutput, as: UTF8.self).split(separator: "\n")
        // ` 0x0000000000000023 (RELRSZ)             7232 (bytes)`: the first word after the tag.
        func value(_ tag: String) -> String? {
            guard let line = lines.first(where: { $0.contains("(\(tag))") }), let range = line.range(of: "(\(tag))")
            else { return nil }
            return line[range.upperBound...].split(separator: " ").first.map(String.init)
        }
        if let count = value("RELACOUNT") { return count }
        if let packed = value("RELRSZ") { return "packed: a DT_RELR table of \(packed) bytes" }
        return "?"
    }

    /// Where a warm invocation's time goes: system calls and Runtime API connections per invocation, for each side.
    struct WarmProfile {
        let invocations: Int
        /// Per side (ours, C): new connections to the Runtime API per invocation.
        let connectionsPerInvocation: [Double]
        /// Per side: `strace -c -f -p` calls per invocation by system call (empty when strace is not there).
        let systemCalls: [[String: Double]]
        /// Per side: resident KiB by mapping (`/proc/PID/smaps` after the warm invocations).
        let residentByMapping: [[String: Int]]
        /// Per side: of those, the KiB the warm invocations touched (`Referenced` after the accessed bits were
        /// cleared following the first invocation) and the KiB the process wrote (`Anonymous`: its own copies of file
        /// pages it wrote to, relocated data, and the heap and stacks; smaps' `Private_Dirty` would also count a file's
        /// pages not yet written back, as freshly unzipped bundled libraries are).
        let referencedByMapping: [[String: Int]]
        let dirtyByMapping: [[String: Int]]
    }

    /// Clears the accessed bits of every page of `pid` (`/proc/PID/clear_refs`), so that smaps' `Referenced` counts
    /// only the pages touched from now on.
    static func clearReferenced(pid: pid_t) {
        let descriptor = open("/proc/\(pid)/clear_refs", O_WRONLY)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        _ = write(descriptor, "1", 1)
    }

    /// Resident KiB of a running process by what is mapped (or another of smaps' KiB fields, `field`): each file by
    /// name, a library without its version (`libcrypto.so`: the bundled copy is named by soname, the system's by its
    /// full version), the executable by segment (`(the executable): code`, `: read-only`, `: writable`: the gold-linked
    /// bootstrap keeps `.rodata` in its writable segment, beside the data the loader relocates), `[heap]`, `[stack]`
    /// and `(anonymous)`.
    static func residentByMapping(pid: pid_t, executable: String, field: String = "Rss:") -> [String: Int] {
        // Read to EOF with read(2): procfs files report a size of 0, and Foundation's whole-file readers stop short.
        let descriptor = open("/proc/\(pid)/smaps", O_RDONLY)
        guard descriptor >= 0 else { return [:] }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += chunk[..<count]
        }
        let text = String(decoding: bytes, as: UTF8.self)
        var totals: [String: Int] = [:]
        var current = "(anonymous)"
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard let first = fields.first else { continue }
            if first.contains("-") && fields.count >= 5 {
                let path = fields.count >= 6 ? fields[5...].joined(separator: " ") : ""
                let permissions = fields[1]
                let segment =
                    permissions.hasPrefix("r-x") ? "code" : permissions.hasPrefix("rw") ? "writable" : "read-only"
                current =
                    path.isEmpty
                    ? "(anonymous)"
                    : path == executable ? "(the executable): " + segment : Self.mappingName(path)
            } else if first == field, fields.count >= 2, let kilobytes = Int(fields[1]) {
                totals[current, default: 0] += kilobytes
            }
        }
        return totals
    }

    /// `/usr/lib/x86_64-linux-gnu/libgnutls.so.30.34.3` → `libgnutls.so`; `[heap]` stays.
    static func mappingName(_ path: String) -> String {
        guard path.hasPrefix("/"), let file = path.split(separator: "/").last else { return path }
        guard let so = file.range(of: ".so") else { return String(file) }
        return String(file[..<so.upperBound])
    }

    /// (b) Warm: one process each, one untimed (cold) invocation, then `invocations` in a row, the two runtimes
    /// alternated event by event; each sample is event handed out → response posted. Then, untimed, `profiled`
    /// more with `strace -c -f` attached to each process, and the Runtime API connections they opened.
    func runtimeWarm(event: [UInt8], invocations: Int, profiled: Int) throws -> (Pair, WarmProfile) {
        let executables = [bootstrap("push-register"), floor("runtime")] + (earlierFloor("runtime").map { [$0] } ?? [])
        let apis = try executables.map { _ in try LocalRuntimeAPI(functionName: "push-register") }
        defer { apis.forEach { $0.stop() } }
        let processes = try zip(executables, apis).map { executable, api in
            try Spawn.start(
                executable: executable, environment: environment.merging(["AWS_LAMBDA_RUNTIME_API": api.address]) { $1 }
            )
        }
        defer { processes.forEach { $0.stop() } }
        var samples: [[Double]] = executables.map { _ in [] }
        func invoke(_ index: Int) throws -> LocalRuntimeAPI.Answer {
            let answer = try apis[index].answer(apis[index].enqueue(event), timeout: .seconds(30))
            try expect(answer, executables[index])
            return answer
        }
        for round in -1..<invocations {
            // After the first (cold) invocation, the pages' accessed bits are cleared: what is `Referenced` at the end
            // is what the warm invocations touched.
            if round == 0 { processes.prefix(2).forEach { Self.clearReferenced(pid: $0.pid) } }
            for index in executables.indices {
                let answer = try invoke(index)
                if round >= 0 { samples[index].append(benchMilliseconds(answer.posted - answer.handedOut)) }
            }
        }
        let pair = Pair(
            ours: median(samples[0]), floor: median(samples[1]), runs: invocations,
            earlierFloor: samples.count > 2 ? median(samples[2]) : nil)
        let smaps = ["Rss:", "Referenced:", "Anonymous:"].map { field in
            zip(processes.prefix(2), executables.prefix(2)).map { process, executable in
                Self.residentByMapping(
                    pid: process.pid, executable: URL(fileURLWithPath: executable).resolvingSymlinksInPath().path,
                    field: field)
            }
        }

        let strace = ["/usr/bin/strace", "/bin/strace"].first { FileManager.default.isExecutableFile(atPath: $0) }
        var tracers: [(Spawn.Running, String)] = []
        if let strace {
            for process in processes.prefix(2) {
                let output = NSTemporaryDirectory() + "bench-warm-strace-\(UUID().uuidString).txt"
                let tracer = try Spawn.start(
                    executable: strace, arguments: ["-c", "-f", "-o", output, "-p", String(process.pid)],
                    environment: environment)
                // strace says so on stderr once it has attached.
                let deadline = ContinuousClock.now + .seconds(10)
                while ContinuousClock.now < deadline,
                    !((try? String(contentsOfFile: tracer.standardErrorFile, encoding: .utf8)) ?? "").contains(
                        "attached")
                {
                    usleep(10_000)
                }
                tracers.append((tracer, output))
            }
        }
        let connectionsBefore = apis.map(\.connectionsAccepted)
        for _ in 0..<profiled {
            for index in 0..<2 { _ = try invoke(index) }
        }
        let connections = zip(apis, connectionsBefore).map { Double($0.connectionsAccepted - $1) / Double(profiled) }
        let systemCalls = tracers.map { tracer, output -> [String: Double] in
            // SIGINT detaches strace, which then writes its summary.
            tracer.stop(signal: SIGINT)
            defer { unlink(output) }
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            var counts: [String: Double] = [:]
            for line in text.split(separator: "\n") {
                let fields = line.split(separator: " ")
                // % time, seconds, usecs/call, calls, [errors], syscall
                guard fields.count >= 5, let calls = Double(fields[3]), let name = fields.last else { continue }
                counts[String(name)] = calls / Double(profiled)
            }
            return counts
        }
        return (
            pair,
            WarmProfile(
                invocations: profiled, connectionsPerInvocation: connections, systemCalls: systemCalls,
                residentByMapping: smaps[0], referencedByMapping: smaps[1], dirtyByMapping: smaps[2])
        )
    }

    /// (d) Peak resident set (KiB, through `c/peak-rss`) of one invocation of each function, median of `runs`:
    /// push-register with the register event (its whole work), push-sweep with `{}` (a CronJob's event), the rest
    /// with a dose-record event (dose-record records it; the others refuse it). The floor: `c/register` with the
    /// register event.
    func peakResident(
        registerEvent: [UInt8], doseEvent: [UInt8], runs: Int
    ) throws -> (functions: [(function: String, kilobytes: Int)], floor: Int) {
        func peak(_ executable: String, _ input: [UInt8]) throws -> Int {
            Int(try usage(executable, input: input, runs: runs).peakResidentKilobytes)
        }
        let floorPeak = try peak(floor("register"), registerEvent)
        let rows = try Self.functions.filter { $0 != "db-migrate" }.map { function in
            let input =
                switch function {
                case "push-register": registerEvent
                case "push-sweep": Array("{}".utf8)
                default: doseEvent
                }
            return (function, try peak(bootstrap(function), input))
        }
        return (rows, floorPeak)
    }

    /// Medians of `runs` runs through `c/peak-rss`: peak resident set (KiB), CPU time in user space and in the
    /// kernel (ms), minor page faults.
    func usage(_ executable: String, input: [UInt8], runs: Int) throws -> (
        peakResidentKilobytes: Double, userMilliseconds: Double, systemMilliseconds: Double, cpuMilliseconds: Double,
        minorFaults: Double
    ) {
        let samples = try (0..<runs).map { _ in
            let outcome = try Spawn.run(
                executable: executable, environment: environment, input: input, peakResidentHelper: floor("peak-rss"))
            guard let usage = outcome.usage else { throw BenchmarkError("peak-rss gave no figure for \(executable)") }
            return usage
        }
        return (
            median(samples.map { Double($0.peakResidentKilobytes) }),
            median(samples.map { Double($0.userMicroseconds) / 1000 }),
            median(samples.map { Double($0.systemMicroseconds) / 1000 }),
            median(samples.map { Double($0.userMicroseconds + $0.systemMicroseconds) / 1000 }),
            median(samples.map { Double($0.minorFaults) })
        )
    }

    /// (e) Each function's `bootstrap`, everything its zip unpacks to, and the zip.
    func sizes() -> [(function: String, binary: Int, unzipped: Int, zipped: Int)] {
        Self.functions.compactMap { function in
            let folder = lambdaDirectory.appendingPathComponent(function)
            let zip = zipDirectory.appendingPathComponent("\(function).zip")
            guard let binary = Self.fileSize(folder.appendingPathComponent("bootstrap").path),
                let zipped = Self.fileSize(zip.path)
            else { return nil }
            var unzipped = 0
            if let files = FileManager.default.enumerator(atPath: folder.path) {
                for case let file as String in files {
                    unzipped += Self.fileSize(folder.appendingPathComponent(file).path, regularOnly: true) ?? 0
                }
            }
            return (function, binary, unzipped, zipped)
        }
    }

    struct BySize {
        let rows: [Int]
        /// Cold push-register, median of `runs` per size.
        let milliseconds: [Double]
        let runs: Int
        /// The register transaction in-process (``PushDeviceRegistry``), one connection per database, the sizes
        /// alternated registration by registration; median of `registrations` per size.
        let inProcessMilliseconds: [Double]
        let registrations: Int
    }

    /// (f) Cold push-register at about 1k and about 1M rows in `push_devices`, alternated run by run: two databases
    /// of the same cluster, made and migrated here, filled as the in-process table benchmark fills (then
    /// `VACUUM ANALYZE` and a checkpoint, so no background work of the fill lands in a sample), dropped after.
    /// Each run is a new caregiver and a new token with an installation id, as the in-process benchmark registers.
    func coldRegisterBySize(runs: Int) throws -> BySize {
        let admin = try PostgresConnection(url: databaseURL)
        defer { admin.close() }
        let names = ["bench_startup_1k", "bench_startup_1m"]
        var urls: [String] = []
        var rows: [Int] = []
        for (name, target) in zip(names, [1_000, 1_000_000]) {
            try admin.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name)"))
            try admin.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
            let url = Self.url(databaseURL, database: name)
            let connection = try PostgresConnection(url: url)
            defer { connection.close() }
            try Migrator(directory: URL(fileURLWithPath: "infra/migrations")).migrate(
                connection, logger: Logger(label: "bench"))
            try DeviceTableBenchmark.fill(to: target, connection: connection)
            try connection.query("VACUUM ANALYZE push_devices")
            rows.append(try connection.query("SELECT count(*) FROM push_devices")[0].decode(Int.self, at: 0))
            urls.append(url)
        }
        defer {
            for name in names { _ = try? admin.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name)")) }
        }
        try admin.query("CHECKPOINT")
        var samples: [[Double]] = [[], []]
        for round in -1..<runs {
            for (index, url) in urls.enumerated() {
                let event = try registerEvent(installationID: "bench-cold-install-\(round)")
                var environment = environment
                environment["DATABASE_URL"] = url
                let outcome = try Spawn.run(
                    executable: bootstrap("push-register"), environment: environment, input: event)
                try expect(outcome, status: 200, "push-register")
                if round >= 0 { samples[index].append(outcome.milliseconds) }
            }
        }
        let registrations = 200
        let connections = try urls.map { try PostgresConnection(url: $0) }
        defer { connections.forEach { $0.close() } }
        var inProcess: [[Double]] = [[], []]
        for index in -1..<registrations {
            for (size, connection) in connections.enumerated() {
                let start = ContinuousClock.now
                _ = try PushDeviceRegistry(connection: connection).register(
                    .init(
                        token: "bench-register-\(UUID().uuidString)", platform: .ios, environment: .development,
                        installationID: "bench-install-\(index)"),
                    caregiverID: UUID())
                if index >= 0 { inProcess[size].append(benchMilliseconds(ContinuousClock.now - start)) }
            }
        }
        return BySize(
            rows: rows, milliseconds: samples.map(median), runs: runs, inProcessMilliseconds: inProcess.map(median),
            registrations: registrations)
    }

    /// `url` with its database (the last path segment) replaced.
    static func url(_ url: String, database: String) -> String {
        let base = url.split(separator: "?", maxSplits: 1)
        let path = base[0]
        let query = base.count > 1 ? "?" + base[1] : ""
        guard let slash = path.lastIndex(of: "/") else { return url }
        return path[...slash] + database + query
    }

    /// Where a warm invocation's database time goes: on one connection with the functions' transaction settings,
    /// alternated, medians of `runs` each, the same caregiver and token as the bench's event (an existing device, as
    /// in the warm loop): the function's register transaction (``PushDeviceRegistry/register(_:caregiverID:deviceCap:)``:
    /// one call of `register_push_device`, migration 000009), then the same statements sent one by one as the rounds
    /// before sent them, added one at a time (the upsert alone; the caregiver's lock; the token's lock; the hand-over;
    /// the cap's update; the disabled rows' clean-up: the whole registration), each in a pipelined transaction of two
    /// round trips, and the C floor's one upsert.
    func registerTransactionCost(caregiver: UUID, token: String, runs: Int) throws -> [(String, Double)] {
        let connection = try PostgresConnection(url: databaseURL)
        defer { connection.close() }
        connection.transactionSettings = Configuration(environment: [:]).transactionSettings
        let registry = PushDeviceRegistry(connection: connection)
        let statements = Self.registerStatements(caregiver: caregiver, token: token)
        let upsert = statements[0].1
        // Each cumulative variant sends its statements in the registration's order: the locks first.
        let order = Self.registrationOrder
        var variants: [(String, () throws -> Void)] = [
            (
                "the function's register transaction: one `register_push_device` call (locks, upsert, hand-over, cap, "
                    + "clean-up)",
                {
                    _ = try registry.register(
                        .init(token: token, platform: .ios, environment: .development, installationID: nil),
                        caregiverID: caregiver)
                }
            )
        ]
        for count in 1...statements.count {
            let sent = order.filter { $0 < count }.map { statements[$0].1 }
            variants.append(
                (
                    "statements one by one: " + statements[count - 1].0,
                    {
                        _ = try connection.withPipelinedTransaction { transaction in
                            var flight = transaction.flight()
                            for statement in sent { flight.add(statement) }
                            _ = try transaction.run(flight)
                        }
                    }
                ))
        }
        variants.append(("the C floor's one upsert (no transaction, no lock)", { _ = try connection.query(upsert) }))
        var samples: [[Double]] = variants.map { _ in [] }
        for round in -1..<runs {
            for (index, variant) in variants.enumerated() {
                let start = ContinuousClock.now
                try variant.1()
                if round >= 0 { samples[index].append(benchMilliseconds(ContinuousClock.now - start)) }
            }
        }
        return zip(variants, samples).map { ($0.0, median($1)) }
    }

    /// The statements the rounds before sent one by one for a registration (``PushDeviceRegistry/register`` before
    /// migration 000009), named, in the order ``registerTransactionCost`` adds them: the upsert first (the floor's one
    /// statement), then the caregiver's and the token's locks, the hand-over, the cap and the clean-up. A registration
    /// sends them locks first (``registrationOrder``). The bench's registration has no installation id, so no rotation.
    static func registerStatements(caregiver: UUID, token: String) -> [(String, PostgresQuery)] {
        let owner = caregiver.uuidString.lowercased()
        let upsert: PostgresQuery = """
            INSERT INTO caregiver_push.push_devices
                (owner_type, owner_id, token, token_sha256, platform, environment, installation_id, is_enabled,
                 last_seen_at)
            VALUES ('CAREGIVER', \(caregiver), \(token), sha256(convert_to(\(token), 'UTF8')), 'ios', 'DEV', NULL, true,
                    now())
            ON CONFLICT ON CONSTRAINT push_devices_owner_token_key DO UPDATE SET
                platform = EXCLUDED.platform, environment = EXCLUDED.environment,
                installation_id = COALESCE(EXCLUDED.installation_id, push_devices.installation_id),
                is_enabled = true, disabled_reason = NULL, last_seen_at = now(), updated_at = now()
            RETURNING id
            """
        return [
            ("the upsert alone", upsert),
            ("+ the caregiver's advisory lock", "SELECT pg_advisory_xact_lock(\(0x4F57_4E52), hashtext(\(owner)))"),
            ("+ the token's advisory lock", "SELECT pg_advisory_xact_lock(\(0x5055_5348), hashtext(\(token)))"),
            (
                "+ the hand-over's update",
                """
                UPDATE caregiver_push.push_devices
                SET is_enabled = false, disabled_reason = 'TOKEN_REASSIGNED', updated_at = now()
                WHERE token_sha256 = sha256(convert_to(\(token), 'UTF8')) AND token = \(token)
                  AND NOT (owner_type = 'CAREGIVER' AND owner_id = \(caregiver)) AND is_enabled
                """
            ),
            (
                "+ the cap's update",
                """
                UPDATE caregiver_push.push_devices
                SET is_enabled = false, disabled_reason = 'REPLACED', updated_at = now()
                WHERE id IN (
                    SELECT id FROM caregiver_push.push_devices
                    WHERE owner_type = 'CAREGIVER' AND owner_id = \(caregiver) AND is_enabled
                    ORDER BY token_sha256 = sha256(convert_to(\(token), 'UTF8')) DESC, last_seen_at DESC, id
                    OFFSET \(Configuration.defaultDeviceCap))
                """
            ),
            (
                "+ the disabled rows' clean-up (the whole registration as the rounds before sent it)",
                """
                DELETE FROM caregiver_push.push_devices
                WHERE id IN (
                    SELECT id FROM caregiver_push.push_devices
                    WHERE owner_type = 'CAREGIVER' AND owner_id = \(caregiver) AND NOT is_enabled
                    ORDER BY updated_at DESC, id
                    OFFSET \(PushDeviceRegistry.disabledRowsKept))
                """
            ),
        ]
    }

    /// ``registerStatements``' indexes in the order a registration sends them: the locks first.
    static let registrationOrder = [1, 2, 0, 3, 4, 5]

    /// A registration on a new connection each time (a new server backend, as a cold function connected directly
    /// gets), alternated, medians of `runs` each, connecting untimed: one `register_push_device` call (whose first
    /// call in a backend loads PL/pgSQL and compiles the function) against the same statements sent one by one.
    func registerOnNewConnection(caregiver: UUID, token: String, runs: Int) throws -> (
        function: Double, statements: Double
    ) {
        let settings = Configuration(environment: [:]).transactionSettings
        let statements = Self.registerStatements(caregiver: caregiver, token: token)
        let sent = Self.registrationOrder.map { statements[$0].1 }
        var samples: [[Double]] = [[], []]
        for round in -1..<runs {
            for variant in 0..<2 {
                let connection = try PostgresConnection(url: databaseURL)
                defer { connection.close() }
                connection.transactionSettings = settings
                let start = ContinuousClock.now
                if variant == 0 {
                    _ = try PushDeviceRegistry(connection: connection).register(
                        .init(token: token, platform: .ios, environment: .development, installationID: nil),
                        caregiverID: caregiver)
                } else {
                    try connection.withPipelinedTransaction { transaction in
                        var flight = transaction.flight()
                        for statement in sent { flight.add(statement) }
                        _ = try transaction.run(flight)
                    }
                }
                if round >= 0 { samples[variant].append(benchMilliseconds(ContinuousClock.now - start)) }
            }
        }
        return (median(samples[0]), median(samples[1]))
    }

    /// `scripts/bench-startup-profile.sh`'s markdown: libraries, the dynamic loader's statistics, system calls and
    /// instruction counts of push-register against the C floors.
    /// `figures`: the run's medians (wall ms ours and floor, CPU ms ours and floor) for the attribution's milliseconds.
    func profile(event: [UInt8], figures: [Double]? = nil) throws -> String {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("register-\(UUID().uuidString).json")
        try Data(event).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let result = try ChildProcess.run(
            executable: URL(fileURLWithPath: "scripts/bench-startup-profile.sh"),
            arguments: [bootstrap("push-register"), floor("register"), floor("trivial"), file.path],
            environment: environment.merging([
                "BENCH_PROFILE_FIGURES": (figures ?? []).map { String(format: "%.3f", $0) }.joined(separator: " ")
            ]) { $1 }, input: Data())
        guard result.exitStatus == 0 else {
            return "\nThe profile failed (exit \(result.exitStatus)): "
                + String(decoding: result.standardError, as: UTF8.self).suffix(500) + "\n"
        }
        return String(decoding: result.standardOutput, as: UTF8.self)
    }

    /// Runs `ours` and `floor` alternately, one untimed round first, and gives the two medians.
    /// With `earlier`, that program is the third of each round (``Pair/earlierFloor``).
    func interleaved(
        runs: Int, ours: String, floor: String, earlier: String? = nil, _ measure: (String) throws -> Double
    ) throws -> Pair {
        let executables = [ours, floor] + (earlier.map { [$0] } ?? [])
        var samples: [[Double]] = executables.map { _ in [] }
        for round in -1..<runs {
            for (index, executable) in executables.enumerated() {
                let value = try measure(executable)
                if round >= 0 { samples[index].append(value) }
            }
        }
        return Pair(
            ours: median(samples[0]), floor: median(samples[1]), runs: runs,
            earlierFloor: samples.count > 2 ? median(samples[2]) : nil)
    }

    private func expect(_ outcome: Spawn.Outcome, status: Int64, _ executable: String) throws {
        guard outcome.exitStatus == 0, outcome.statusCode == status else {
            throw BenchmarkError(
                "\(executable) exited \(outcome.exitStatus) answering "
                    + "\(outcome.statusCode.map(String.init) ?? "nothing")"
                    + " (expected \(status)): \(String(decoding: outcome.standardError, as: UTF8.self).suffix(400))")
        }
    }

    private func expect(_ answer: LocalRuntimeAPI.Answer, _ executable: String) throws {
        let status = (try? JSONValue.parse(answer.body))?["statusCode"]?.integerValue
        guard answer.kind == "response", status == 200 else {
            throw BenchmarkError(
                "\(executable) posted \(answer.kind) \(String(decoding: answer.body, as: UTF8.self).prefix(300))")
        }
    }

    private static func fileSize(_ path: String, regularOnly: Bool = false) -> Int? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path) else { return nil }
        if regularOnly, attributes[.type] as? FileAttributeType != .typeRegular { return nil }
        return (attributes[.size] as? NSNumber)?.intValue
    }
}

/// The markdown of the start-up section, from `scripts/bench.sh`'s artifacts and floors:
/// `BENCH_LAMBDA_DIRECTORY` (the unzipped zips), `BENCH_LAMBDA_ZIPS`, `BENCH_C_DIRECTORY` and the static
/// `BENCH_TRIVIAL_BINARY`.
/// What the floor summary (``FloorSummary``) reads from the start-up section.
struct StartupFigures {
    let cold: StartupBenchmark.Pair
    let runtimeCold: StartupBenchmark.Pair
    let runtimeWarm: StartupBenchmark.Pair
    let resident: StartupBenchmark.Pair?
    /// One line each for the goals' table: where the cold gap, a warm invocation and the resident pages go.
    let coldWhere: String?
    let warmWhere: String?
    let residentWhere: String?
}

func startupSection(databaseURL: String, environment: [String: String]) throws -> (
    markdown: String, figures: StartupFigures?
) {
    guard let lambda = environment["BENCH_LAMBDA_DIRECTORY"], let zips = environment["BENCH_LAMBDA_ZIPS"],
        let floors = environment["BENCH_C_DIRECTORY"]
    else {
        return (
            "\n## Start-up against C\n\nNot measured: scripts/bench.sh sets BENCH_LAMBDA_DIRECTORY, BENCH_LAMBDA_ZIPS "
                + "and BENCH_C_DIRECTORY.\n", nil
        )
    }
    let benchmark = StartupBenchmark(
        lambdaDirectory: URL(fileURLWithPath: lambda), zipDirectory: URL(fileURLWithPath: zips),
        floorDirectory: URL(fileURLWithPath: floors), databaseURL: databaseURL)
    let runs = 40
    let warmInvocations = 200
    // The machine is shared: say how loaded it was when the section started.
    let load =
        (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3)
        .joined(separator: " ") ?? "?"
    let started = Timestamp.rfc3339UTC(Date())
    // One caregiver and one device token for every run of (a), (b) and (d): the same valid event for both sides.
    let caregiver = UUID()
    let event = try benchmark.registerEvent(caregiver: caregiver, token: "bench-startup-device")
    let cold = try benchmark.coldStdin(event: event, runs: runs)
    let alone = try benchmark.startupAlone(runs: runs, staticTrivial: environment["BENCH_TRIVIAL_BINARY"])
    let runtimeCold = try benchmark.runtimeCold(event: event, runs: runs)
    let (runtimeWarm, warmProfile) = try benchmark.runtimeWarm(
        event: event, invocations: warmInvocations, profiled: 50)
    let seed = try PostgresConnection(url: databaseURL)
    let home = try BenchSeed.household(devices: 0, connection: seed)
    seed.close()
    let doseBody = #"{"medicationId":"\#(home.medication.uuidString)","scheduledAt":"2026-01-05T08:00:00+09:00"}"#
    let doseEvent = Array(try BenchSeed.post("/api/dose-records", bearer: home.session, body: doseBody))
    let resident = try benchmark.peakResident(registerEvent: event, doseEvent: doseEvent, runs: 5)
    let sizes = benchmark.sizes()

    func goal(_ ratio: Double, _ limit: Double?) -> String {
        guard let limit else { return "—" }
        return String(format: "≤ %.1f: %@", limit, ratio <= limit ? "met" : "**missed**")
    }
    func row(_ name: String, _ pair: StartupBenchmark.Pair, _ unit: String, _ limit: Double?, _ how: String) -> String {
        let earlier = pair.earlierFloor.map { String(format: "%.2f %@ (%.2f)", $0, unit, pair.ours / $0) } ?? "—"
        return String(
            format: "| %@ | %.2f %@ | %.2f %@ | **%.2f** | %@ | %@ | %@ |\n", name, pair.ours, unit, pair.floor, unit,
            pair.ratio, goal(pair.ratio, limit), earlier, how)
    }
    var report = """

        ## Start-up against C

        Made by `make bench`; this section alone: `make bench-startup` (`BENCH_ONLY=startup
        BENCH_OUTPUT=bench-out/startup.md scripts/bench.sh`). This run started at \(started), \(ProcessInfo.processInfo
        .activeProcessorCount) cores, load average \(load) (1, 5, 15 min).
        **Ours** is what `make release` ships: `scripts/bench.sh` runs `scripts/release.sh` (release builds with
        `--static-swift-stdlib` and its link flags), unzips each `dist/lambda/<function>.zip` into
        `.build/bench-lambda/<function>/` and runs that `bootstrap`, which loads the libraries bundled in its `lib/`.
        **The floors** are C programs in `Tests/Benchmarks/c`, built by `scripts/bench.sh` with `cc -O2`, linked
        dynamically against the system's libpq and libcurl: `c/trivial` (reads stdin, prints a tiny JSON),
        `c/register` (reads the event, checks the bearer token as push-register does: `alg` HS256, the HMAC-SHA-256
        signature under `SUPABASE_JWT_SECRET` over OpenSSL's low-level SHA-256 as the function computes it, `exp`,
        `aud` and `role`; connects with `DATABASE_URL`, runs the register upsert
        `INSERT … ON CONFLICT ON CONSTRAINT push_devices_owner_token_key DO UPDATE … RETURNING id` once, prints the
        response, closes stdout), `c/runtime` (the same as a Lambda custom runtime over libcurl:
        `GET …/invocation/next`, the check and the upsert on a connection opened at first use and kept,
        `POST …/invocation/{id}/response`, loop; libcurl, as AWS's C++ runtime uses it, where the function speaks
        HTTP over a socket of its own and never loads libcurl unless it sends: docs/decisions.md#runtime-api-socket).
        What the floors still skip: they search the event and the token's
        JSON instead of parsing them, and run one statement with no transaction, no advisory lock, no device cap, no
        installation rotation or hand-over. **Earlier floor**: `c/register-unverified` and `c/runtime-unverified`,
        the floors of the rounds before this one, which decode the token's `sub` without checking anything; they
        run as a third program in the same interleaved loops, for comparison. One harness for both sides (`Spawn`: `posix_spawn` with the event
        already in the stdin pipe, start → stdout's EOF); the two sides alternate run by run after one untimed round;
        medians. The event: one caregiver with a valid HS256 session registering one device token (`ios`, `DEV`),
        the same bytes for both sides in every run. The Runtime API is served by the bench process itself
        (`LocalRuntimeAPI`: `GET next` blocks until an event exists and returns it with
        `Lambda-Runtime-Aws-Request-Id`, `-Deadline-Ms`, `-Invoked-Function-Arn` and `-Trace-Id`; a response `POST`
        gets 202), push-register looping on it because `AWS_LAMBDA_RUNTIME_API` is set (`FunctionHost`).

        | figure | push-register | C floor | ours ÷ C | goal | earlier floor (ours ÷ it) | measured |
        |---|---:|---:|---:|---|---:|---|

        """
    report += row(
        "cold register: start → stdout EOF", cold, "ms", 1.2,
        "\(runs) runs each: `bootstrap < event` against `c/register < event`")
    report += row(
        "Lambda runtime, cold: process start → first response posted", runtimeCold, "ms", 1.2,
        "\(runs) new processes each, the event queued before the start; against `c/runtime`")
    report += row(
        "Lambda runtime, warm: event handed out → response posted", runtimeWarm, "ms", 1.5,
        "one process each, \(warmInvocations) invocations in a row, the two alternated; against `c/runtime`")
    report += row(
        "start-up alone: empty stdin → response (ours: a 400 problem)", alone.dynamic, "ms", nil,
        "\(runs) runs each, against `c/trivial` (dynamic)")
    if let staticFloor = alone.staticFloor {
        report += row(
            "start-up alone, against a static trivial C program", staticFloor, "ms", nil,
            "\(runs) runs each, against `c/trivial` built with `-static`")
    }
    let residentPair = resident.functions.first(where: { $0.function == "push-register" }).map { register in
        StartupBenchmark.Pair(ours: Double(register.kilobytes) / 1024, floor: Double(resident.floor) / 1024, runs: 5)
    }
    if let pair = residentPair {
        report += row(
            "peak resident set of one registration", pair, "MiB", 1.5,
            "`c/peak-rss` (fork, exec, `wait4`'s `ru_maxrss`), median of 5 each, the register event; against "
                + "`c/register`")
    }
    report += """

        **Peak resident set of each function** (one invocation through `c/peak-rss`: fork, exec, `wait4`'s
        `ru_maxrss`; median of 5): push-register with the register event, push-sweep with `{}` (a CronJob's event),
        the others with a valid dose-record event (dose-record records it, the others refuse it). Floor:
        `c/register` with the register event, \(String(format: "%.1f", Double(resident.floor) / 1024)) MiB.
        Goal: ≤ 1.5 ×.

        | function | peak RSS MiB | × c/register | goal ≤ 1.5 |
        |---|---:|---:|---|

        """
    for (function, kilobytes) in resident.functions {
        let ratio = Double(kilobytes) / Double(resident.floor)
        report += String(
            format: "| %@ | %.1f | %.2f | %@ |\n", function, Double(kilobytes) / 1024, ratio,
            ratio <= 1.5 ? "met" : "**missed**")
    }
    report += """

        **Sizes of what ships** (`scripts/release.sh`'s `dist/lambda/<function>.zip`, made in this run; unzipped:
        `bootstrap` plus the bundled `lib/`).

        | function | bootstrap MB | unzipped MB | zip MB |
        |---|---:|---:|---:|

        """
    for size in sizes {
        report += String(
            format: "| %@ | %.1f | %.1f | %.1f |\n", size.function, Double(size.binary) / 1e6,
            Double(size.unzipped) / 1e6, Double(size.zipped) / 1e6)
    }
    // The Swift floors (Tests/Benchmarks/probes/rss, built by scripts/bench.sh): a trivial static Swift program, and
    // one with FoundationEssentials' JSON, each fed the register event's body on one line.
    let probeInput = Array(#"{"token":"t","platform":"ios","environment":"DEV"}"#.utf8) + [UInt8(ascii: "\n")]
    var probes: [(String, String, [UInt8])] = []
    if let directory = environment["BENCH_SWIFT_PROBES"] {
        for (name, what) in [
            ("swift-trivial", "a trivial static Swift program"),
            ("swift-json", "the same with FoundationEssentials' JSON"),
        ] {
            probes.append(("\(what) (`probes/rss/\(name)`)", directory + "/" + name, probeInput))
        }
    }
    let usageRows =
        [
            ("push-register, empty stdin", benchmark.bootstrap("push-register"), [UInt8]()),
            ("c/trivial, empty stdin", benchmark.floor("trivial"), []),
            ("push-register, register event", benchmark.bootstrap("push-register"), event),
            ("c/register, register event", benchmark.floor("register"), event),
        ] + probes
    report += """

        ### Where the time goes

        **CPU and page faults per invocation** (`c/peak-rss`: `wait4`'s rusage, median of 9 each): CPU time in user
        space and in the kernel together (the total is exact; the kernel splits it between the two by 4 ms tick
        sampling, too coarse for runs this short). What the wall time has beyond the CPU is waiting (PostgreSQL's
        answers, the harness).

        | run | CPU ms (user + kernel) | minor page faults | peak RSS MiB |
        |---|---:|---:|---:|

        """
    var cpu: [String: Double] = [:]
    var peak: [String: Double] = [:]
    for (name, executable, input) in usageRows {
        let usage = try benchmark.usage(executable, input: input, runs: 9)
        cpu[name] = usage.cpuMilliseconds
        peak[name] = usage.peakResidentKilobytes / 1024
        report += String(
            format: "| %@ | %.2f | %.0f | %.1f |\n", name, usage.cpuMilliseconds, usage.minorFaults,
            usage.peakResidentKilobytes / 1024)
    }
    let profile = try benchmark.profile(
        event: event,
        figures: [
            cold.ours, cold.floor, cpu["push-register, register event"] ?? 0, cpu["c/register, register event"] ?? 0,
        ])
    report += profile
    report += String(
        format: """

            **A warm invocation, system call by system call**: %d more invocations of each runtime after the timed
            ones, untimed, with `strace -c -f -p` attached to each process; calls per invocation (the twelve
            push-register makes most often, and the total), and new TCP connections to the Runtime API per invocation
            (the bench's own count): ours %.2f, `c/runtime` %.2f.

            | system call | push-register per invocation | c/runtime per invocation |
            |---|---:|---:|

            """, warmProfile.invocations, warmProfile.connectionsPerInvocation[0],
        warmProfile.connectionsPerInvocation[1])
    if warmProfile.systemCalls.count == 2 {
        let (ours, floor) = (warmProfile.systemCalls[0], warmProfile.systemCalls[1])
        for (name, calls) in ours.filter({ $0.key != "total" }).sorted(by: { $0.value > $1.value }).prefix(12) {
            report += String(format: "| %@ | %.1f | %.1f |\n", name, calls, floor[name] ?? 0)
        }
        report += String(format: "| **total** | **%.1f** | **%.1f** |\n", ours["total"] ?? 0, floor["total"] ?? 0)
    } else {
        report += "| strace is not installed | | |\n"
    }
    let (oursResident, floorResident) = (warmProfile.residentByMapping[0], warmProfile.residentByMapping[1])
    let (oursTouched, floorTouched) = (warmProfile.referencedByMapping[0], warmProfile.referencedByMapping[1])
    let (oursDirty, floorDirty) = (warmProfile.dirtyByMapping[0], warmProfile.dirtyByMapping[1])
    func mebibytes(_ table: [String: Int], _ name: String? = nil) -> Double {
        Double(name.map { table[$0] ?? 0 } ?? table.values.reduce(0, +)) / 1024
    }
    report += String(
        format: """

            **Resident memory by mapping** of the two warm runtimes after their %d timed invocations
            (`/proc/PID/smaps` summed by what is mapped, the executable by segment; the twelve largest of
            push-register's). Resident: `Rss`, every page mapped, whether the process touched it or the kernel's
            fault-around mapped it beside a touched one (a page fault in a file mapping maps up to 64 KiB of the file's
            cached pages about it). Warm: the pages the timed invocations touched (`Referenced` after the accessed bits
            were cleared once the first invocation had answered, `/proc/PID/clear_refs`). Written: the process's own
            copies of pages it wrote (`Anonymous`: relocated data, the heap, stacks). Totals: resident %.1f MiB
            against %.1f MiB, warm %.1f against %.1f, written %.1f against %.1f.

            | mapping | push-register resident MiB | warm | written | c/runtime resident MiB | warm | written |
            |---|---:|---:|---:|---:|---:|---:|

            """, warmInvocations, mebibytes(oursResident), mebibytes(floorResident), mebibytes(oursTouched),
        mebibytes(floorTouched), mebibytes(oursDirty), mebibytes(floorDirty))
    for (name, _) in oursResident.sorted(by: { $0.value > $1.value }).prefix(12) {
        report += String(
            format: "| %@ | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", name, mebibytes(oursResident, name),
            mebibytes(oursTouched, name), mebibytes(oursDirty, name), mebibytes(floorResident, name),
            mebibytes(floorTouched, name), mebibytes(floorDirty, name))
    }
    let transaction = try benchmark.registerTransactionCost(
        caregiver: caregiver, token: "bench-startup-device", runs: warmInvocations)
    report += """

        **A warm invocation's database work** (in the bench process, one connection kept, as a warm function keeps
        it, with the functions' transaction settings; the eight alternated, \(warmInvocations) each, medians; the bench
        event's caregiver and token, a device that exists, as in the warm loop). The device cap needs the caregiver's
        lock and its update; the token's lock keeps two caregivers registering one phone at once from both keeping it
        (docs/behaviour.md#devices). First what ships, one call of `register_push_device` (migration 000009, whose
        statements' plans PL/pgSQL keeps for the connection's life); then the same statements sent one by one, as the
        rounds before sent them (each parsed and planned again at every registration), added one at a time in the
        registration's order (locks first); then the C floor's one statement. Every transaction is two round trips
        (`BEGIN`, the settings and the statements in one flight; `COMMIT`), as the function's.

        | what runs | median ms | × the C floor's upsert |
        |---|---:|---:|

        """
    let upsertAlone = transaction.last?.1 ?? 1
    for (name, milliseconds) in transaction {
        report += String(format: "| %@ | %.3f | %.2f |\n", name, milliseconds, milliseconds / upsertAlone)
    }
    let newConnection = try benchmark.registerOnNewConnection(
        caregiver: caregiver, token: "bench-startup-device", runs: runs)
    report += String(
        format: """

            **The same registration on a new connection** (a new server backend each time, as a cold function
            connected straight to PostgreSQL gets; connecting untimed; alternated, %d each, medians): one
            `register_push_device` call %.3f ms, the statements sent one by one %.3f ms (%+.3f ms for the call: a
            backend's first call compiles the function, and plans each statement as the first one-by-one
            registration does; the server preloads PL/pgSQL, as Supabase's does, so no backend loads it at its first
            call: on a server that does not, that costs more, docs/decisions.md#plpgsql-preloaded). Behind the transaction-mode pooler the deployment takes
            (docs/deploy.md), a cold function gets a server backend that registered before, and pays this at most once
            per server connection ("Behind PgBouncer").

            """, runs, newConnection.function, newConnection.statements,
        newConnection.function - newConnection.statements)
    if let configuration = environment["BENCH_CONFIGURATION"], configuration != "release" {
        report += """

            The bench itself is a \(configuration) build in this run (`BENCH_CONFIGURATION=\(configuration)`), and so is
            the code this table times in its own process: only the shipped functions' figures are a release build's.

            """
    }
    report += try leversSection(benchmark, event: event, runs: runs, environment: environment)
    // The goals' table's "where the time goes" lines.
    let coldWhere = profile.split(separator: "\n").first { $0.hasPrefix("Largest parts of the gap:") }.map {
        String($0.dropFirst("Largest parts of the gap:".count)).trimmingCharacters(in: .whitespaces)
    }
    let warmCalls =
        warmProfile.systemCalls.count == 2
        ? String(
            format: "; system calls per invocation %.1f against %.1f", warmProfile.systemCalls[0]["total"] ?? 0,
            warmProfile.systemCalls[1]["total"] ?? 0) : ""
    let warmWhere =
        transaction.count == 8
        ? String(
            format:
                "a warm invocation's gap is %.2f ms; in-process, the function's register transaction (one PL/pgSQL "
                + "call) takes %.2f ms, the same statements sent one by one %.2f ms (of which the locks and the upsert "
                + "%.2f, the cap's update +%.2f), the floor's one upsert %.2f ms: the database's share of the gap "
                + "%.2f ms, the rest (%.2f ms) outside it (the event's and the token's JSON, the HMAC, the answer, "
                + "the Runtime API's HTTP)%@ (\"A warm invocation's database work\")",
            runtimeWarm.ours - runtimeWarm.floor, transaction[0].1, transaction[6].1, transaction[3].1,
            transaction[5].1 - transaction[4].1, transaction[7].1, transaction[0].1 - transaction[7].1,
            runtimeWarm.ours - runtimeWarm.floor - (transaction[0].1 - transaction[7].1), warmCalls) : nil
    // What no Swift executable sheds: the probes' peaks against c/trivial's, and what that leaves of the goal.
    let swiftFloors = probes.map { peak[$0.0] ?? 0 }
    let swiftFloorWhere =
        swiftFloors.count == 2
        ? String(
            format:
                "; the Swift floors (\"CPU and page faults per invocation\"): a trivial static Swift program peaks "
                + "at %.1f MiB against c/trivial's %.1f, with FoundationEssentials' JSON %.1f: c/register (%.1f) plus "
                + "the Swift runtime's own %.1f is already %.2f × c/register",
            swiftFloors[0], peak["c/trivial, empty stdin"] ?? 0, swiftFloors[1],
            peak["c/register, register event"] ?? 0, swiftFloors[0] - (peak["c/trivial, empty stdin"] ?? 0),
            ((peak["c/register, register event"] ?? 0) + swiftFloors[0] - (peak["c/trivial, empty stdin"] ?? 0))
                / max(peak["c/register, register event"] ?? 1, 0.001)) : ""
    let executableResident = oursResident.filter { $0.key.hasPrefix("(the executable)") }.values.reduce(0, +)
    let executableTouched = oursTouched.filter { $0.key.hasPrefix("(the executable)") }.values.reduce(0, +)
    let residentWhere =
        String(
            format:
                "resident %.1f MiB against %.1f, of which the warm invocations touched %.1f against %.1f; the "
                + "executable %.1f MiB resident, %.1f of it touched warm, the rest start-up's or fault-around's; ",
            mebibytes(oursResident), mebibytes(floorResident), mebibytes(oursTouched), mebibytes(floorTouched),
            Double(executableResident) / 1024, Double(executableTouched) / 1024)
        + oursResident.sorted(by: { $0.value > $1.value }).prefix(4).map { name, kilobytes in
            String(format: "%@ %.1f (C: %.1f)", name, Double(kilobytes) / 1024, mebibytes(floorResident, name))
        }.joined(separator: ", ")
    return (
        report,
        StartupFigures(
            cold: cold, runtimeCold: runtimeCold, runtimeWarm: runtimeWarm, resident: residentPair,
            coldWhere: coldWhere.map {
                $0
                    + String(
                        format: "; of the database's part, on a new server backend the registration's PL/pgSQL call "
                            + "costs %+.2f ms against the statements sent one by one (\"The same registration on a new "
                            + "connection\")", newConnection.function - newConnection.statements)
            }, warmWhere: warmWhere,
            residentWhere: "warm runtime's resident pages by mapping (\"Resident memory by mapping\"): " + residentWhere
                + swiftFloorWhere
        )
    )
}

/// The cold-start levers, each alone: `BENCH_LEVERS_DIRECTORY/<lever>/bootstrap`, made by scripts/bench.sh.
func leversSection(
    _ benchmark: StartupBenchmark, event: [UInt8], runs: Int, environment: [String: String]
) throws -> String {
    guard let directory = environment["BENCH_LEVERS_DIRECTORY"] else {
        return "\n**Cold-start levers**: not measured (scripts/bench.sh sets BENCH_LEVERS_DIRECTORY).\n"
    }
    let explained = [
        "unstripped": "the symbol and debug sections kept (`RELEASE_STRIP=0`): what stripping moved",
        "linker-order":
            "**shipped the other way**: DT_NEEDED as the Swift link lists it (libssl, libm, libgcc_s ahead of libc in "
            + "the loader's lookup scope), not reordered by `scripts/needed-order.sh`; above 1: what the reorder saves",
        "evp-digests":
            "**shipped the other way**: SHA-256 and the token's HMAC through EVP (`EVP_Digest`, `HMAC()`: the first "
            + "use loads OpenSSL's configuration and default provider), not the low-level SHA-256; above 1: what the "
            + "low-level path saves",
        "function-sections":
            "every function and datum in a section of its own (`-Xfrontend -function-sections`), so that the "
            + "`--gc-sections` SwiftPM already passes can drop unused ones",
        "lld": "linked by lld instead of gold (swiftc's default linker on Linux); the baseline of `relr`",
        "relr":
            "relative relocations packed (lld, `-z pack-relative-relocs`, DT_RELR); **not shippable**: it needs "
            + "glibc 2.36 (`GLIBC_ABI_DT_RELR`), Amazon Linux 2023 has 2.34",
    ]
    var report = """

        **Cold-start levers, each alone** (`scripts/bench.sh` builds each variant of push-register with one lever
        changed; each is run beside the shipped bootstrap's `lib/`, cold through stdin to stdout's EOF, the register
        event, alternated with the shipped bootstrap run by run, \(runs) runs each, medians). SwiftPM already links
        release executables with `--gc-sections`. Relative relocations: `readelf -d`'s `RELACOUNT`, what the loader
        applies before `main`.

        | lever | what changes | variant ms | shipped ms | variant ÷ shipped | instructions, variant − shipped (callgrind) | variant MB | shipped MB | relative relocations, variant / shipped |
        |---|---|---:|---:|---:|---:|---:|---:|---:|

        """
    let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    // The HMAC's provider start-up in C alone: the fair floor computed through OpenSSL's HMAC() against the shipped
    // floor's low-level SHA-256, both C, both the register event.
    let evpFloor = benchmark.floor("register-evp")
    if FileManager.default.isExecutableFile(atPath: evpFloor) {
        let pair = try benchmark.interleaved(runs: runs, ours: evpFloor, floor: benchmark.floor("register")) {
            executable in
            let outcome = try Spawn.run(executable: executable, environment: benchmark.environment, input: event)
            guard outcome.exitStatus == 0, outcome.statusCode == 200 else {
                throw BenchmarkError("\(executable) answered \(outcome.statusCode.map(String.init) ?? "nothing")")
            }
            return outcome.milliseconds
        }
        report += String(
            format: "| C: HMAC() | `c/register` with the token's HMAC through OpenSSL's `HMAC()` (EVP) against "
                + "`c/register` (low-level SHA-256): the provider's start-up alone, in C | %.2f | %.2f | %.3f | %@ | | | |\n",
            pair.ours, pair.floor, pair.ratio,
            (benchmark.instructions(evpFloor, input: event).flatMap { variant in
                benchmark.instructions(benchmark.floor("register"), input: event).map {
                    String(format: "%+d (%.3f ×)", variant - $0, Double(variant) / Double($0))
                }
            } ?? "—"))
    }
    for name in names {
        let variant = URL(fileURLWithPath: directory).appendingPathComponent(name).appendingPathComponent("bootstrap")
        guard FileManager.default.isExecutableFile(atPath: variant.path) else { continue }
        let lever = try benchmark.lever(name, variant: variant.path, event: event, runs: runs)
        let counted = lever.instructions.map { String(format: "%+d (%.3f ×)", $0 - $1, Double($0) / Double($1)) } ?? "—"
        report += String(
            format: "| %@ | %@ | %.2f | %.2f | %.3f | %@ | %.1f | %.1f | %@ / %@ |\n", name, explained[name] ?? "—",
            lever.timing.ours, lever.timing.floor, lever.timing.ratio, counted, Double(lever.bytes.variant) / 1e6,
            Double(lever.bytes.shipped) / 1e6, lever.relativeRelocations.variant, lever.relativeRelocations.shipped)
    }
    report += """

        What ships from these: the low-level SHA-256 for the token's HMAC and the device token's hash (`evp-digests`
        is the EVP way it replaced) and the reordered DT_NEEDED (`linker-order` is the linker's order it replaced),
        each kept because its instruction count is lower and it changes nothing else. Not shipped: `function-sections`
        and `lld` (no change worth a second linker or flag), `relr` (Amazon Linux 2023's glibc cannot load it),
        `unstripped` (stripping stays: the same instructions at start-up, a smaller zip). Also shipped, with no
        variant here: the environment read once (`FunctionHost.main(environment:)`; FoundationEssentials'
        `ProcessInfo.environment` builds a new dictionary at every call, and a cold start called it twice).
        FoundationEssentials stays: its
        share of the gap is the JSON and Foundation rows of "Where the cold gap goes", against which a rewrite of the
        coders would be measured.

        """
    return report
}

/// The device-table section: in-process register at ~1k and ~1M rows and, when measured, the cold executable.
func deviceTableSection(
    _ table: (results: [DeviceTableBenchmark.Result], plans: [(query: String, plan: String)]),
    cold: StartupBenchmark.BySize?
) -> String {
    var report = """

        ## push-register as push_devices grows

        The register transaction (advisory lock, upsert, installation rotation, hand-over) in-process, median of 200
        registrations, with the table at about 1k rows and at about 1M rows. Ratio: against the 1k run. Goal: ≤ 1.1.

        | rows in push_devices | median ms | × 1k |
        |---:|---:|---:|

        """
    for result in table.results {
        report += String(
            format: "| %d | %.2f | %.2f |\n", result.rows, result.medianMilliseconds,
            result.medianMilliseconds / table.results[0].medianMilliseconds)
    }
    if let cold, cold.milliseconds.count == 2 {
        report += String(
            format: """

                **The same, interleaved, and through the shipped executable**: two databases of the same cluster made
                for it (migrated, filled like the table above, `VACUUM ANALYZE`, a checkpoint), the sizes alternated run
                by run so that the machine's other load falls on both alike. In-process: the same transaction, one
                connection per database, median of %d each. Cold: push-register (`dist/lambda` `bootstrap`) through
                stdin to stdout's EOF (the start-up section's harness), each run a new caregiver and token with an
                installation id, median of %d each. Goal: ≤ 1.1.

                | rows in push_devices | in-process median ms | × 1k | cold median ms | × 1k |
                |---:|---:|---:|---:|---:|
                | %d | %.2f | 1.00 | %.2f | 1.00 |
                | %d | %.2f | **%.2f** | %.2f | **%.2f** |

                """, cold.registrations, cold.runs, cold.rows[0], cold.inProcessMilliseconds[0], cold.milliseconds[0],
            cold.rows[1], cold.inProcessMilliseconds[1], cold.inProcessMilliseconds[1] / cold.inProcessMilliseconds[0],
            cold.milliseconds[1], cold.milliseconds[1] / cold.milliseconds[0])
    }
    let sequentialScans = table.plans.filter { $0.plan.contains("Seq Scan on push_devices") }.count
    report += "\nPlans at 1M rows (sequential scans of push_devices: \(sequentialScans)):\n"
    for (query, plan) in table.plans {
        report += "\n\(query):\n\n```\n\(plan)\n```\n"
    }
    return report
}

/// The cold measurement at two table sizes, when scripts/bench.sh has made the artifacts and floors.
func coldRegisterBySize(databaseURL: String, environment: [String: String]) throws -> StartupBenchmark.BySize? {
    guard let lambda = environment["BENCH_LAMBDA_DIRECTORY"], let zips = environment["BENCH_LAMBDA_ZIPS"],
        let floors = environment["BENCH_C_DIRECTORY"]
    else { return nil }
    return try StartupBenchmark(
        lambdaDirectory: URL(fileURLWithPath: lambda), zipDirectory: URL(fileURLWithPath: zips),
        floorDirectory: URL(fileURLWithPath: floors), databaseURL: databaseURL
    ).coldRegisterBySize(runs: 30)
}

import Codecs
import Libpq
import Curl
import Migrations
import CaregiverPush
import Foundation
import Logging

// `make bench`: runs the benchmarks against the database in DATABASE_URL and writes docs/benchmarks.md.
// Every figure is also given as a ratio to a baseline measured in the same run: this machine is shared and noisy.

// `bench --fcm-stand-in DELAY_MS`: this executable as the FCM emulator in a process of its own (EmulatorProcess).
if CommandLine.arguments.dropFirst().first == EmulatorProcess.flag {
    EmulatorProcess.serve(arguments: Array(CommandLine.arguments.dropFirst(2)))
}

let environment = ProcessInfo.processInfo.environment
guard let databaseURL = environment["DATABASE_URL"] else {
    FileHandle.standardError.write(Data("bench: DATABASE_URL is not set\n".utf8))
    exit(2)
}
let output = CommandLine.arguments.dropFirst().first ?? "docs/benchmarks.md"
let delay = 50

/// The levers tried on the sender's own cost per message, each with what it measured when it was tried:
/// quoted, not re-measured (the other figures are this run's). Declared before the top-level code that reads it:
/// a global declared below its first use is read before it is initialised.
let senderLeversNote = """

    **Levers on the sender's cost per message** (2026-11-26, `BENCH_ONLY=push BENCH_PUSH_COUNTS=1,100,1000`, the
    stand-in in its own process, the 2 cores 100% busy with other builds throughout, so compare within a row; the
    dispatching thread's CPU per delivered message at 1,000 devices, and push-sweep's CPU per delivery over the
    10,000 backlog). Where it went before (`perf record -e cpu-clock` on the dispatching thread during the
    1,000-device rounds): Foundation's `JSONEncoder` building each device's message 24% and the outcomes' `jsonb`
    document 6%, malloc/free 24%, libcurl and nghttp2 15%, the kernel (send, receive, poll) 9%, OpenSSL 8%,
    reading response headers 4%, parsing FCM's answer 2%, timestamps parsed per leased row 2%.

    | lever | dispatcher µs per message, 1,000 devices | push-sweep µs per delivery | shipped |
    |---|---:|---:|:---:|
    | none (this branch's base) | 208 | 195 | — |
    | the message encoded once per event, the token spliced in; the event's columns decoded once per lease; \
    outcomes recorded over `unnest` arrays, the device statement only when a token died | 109 | 117 | yes |
    | the multi loop walks its waiting transfers only when one is due or expires, and only uncounted \
    connection openers | 108 (no change unpaced) | 126 (noise) | yes |
    | response headers read byte by byte (4–5% of what was left) | 97 (all four: 0.47 × the base) | 106 (0.54 × the base) | yes |
    | `curl_multi_socket_action` over epoll instead of `curl_multi_perform`, which checks every transfer's \
    socket with a `poll` of its own (6% of what was left) | not measured | | no: written, not tested in time |

    push-sweep over the 10,000 backlog in those runs: 1,038 deliveries/s on the base, 1,084–1,550/s with the
    levers, the stand-in's own process spending 211–292 µs of CPU per message, twice the sender's: on two cores
    shared with other builds the 5,000/s goal could not be judged, and a quiet `make bench` decides it.

    """

do {
    let connection = try PostgresConnection(url: databaseURL)
    try Migrator(directory: URL(fileURLWithPath: "infra/migrations")).migrate(
        connection, logger: Logger(label: "bench"))
    connection.close()

    let binDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        .deletingLastPathComponent()
    // The functions as `make release` ships them (scripts/bench.sh unzips dist/lambda and links each bootstrap under
    // its function's name here); the bench's own build directory when run some other way.
    let functionDirectory = environment["BENCH_FUNCTIONS_DIRECTORY"].map { URL(fileURLWithPath: $0) } ?? binDirectory
    // `BENCH_ONLY=pooler`: that section alone, written to the output path (a quick run while working on it).
    if environment["BENCH_ONLY"] == "pooler" {
        let section = try poolerSection(
            binDirectory: functionDirectory, databaseURL: databaseURL, environment: environment)
        try ("# Benchmarks (pooler section only)\n" + section).write(toFile: output, atomically: true, encoding: .utf8)
        print(section)
        exit(0)
    }
    // `BENCH_ONLY=startup`: the start-up section and the device table (in-process and cold), nothing else.
    if environment["BENCH_ONLY"] == "startup" {
        let startup = try startupSection(databaseURL: databaseURL, environment: environment)
        let section =
            startupGoals(startup.figures).markdown + startup.markdown
            + deviceTableSection(
                try DeviceTableBenchmark(databaseURL: databaseURL, registrations: 200).run(),
                cold: try coldRegisterBySize(databaseURL: databaseURL, environment: environment))
        try ("# Benchmarks (start-up section only)\n" + section).write(
            toFile: output, atomically: true, encoding: .utf8)
        print(section)
        exit(0)
    }

    // `BENCH_ONLY=load`: the whole recording under an open-loop load (LoadBenchmark), nothing else. BENCH_LOAD_RATES,
    // BENCH_LOAD_SECONDS, BENCH_LOAD_RETRY_AFTER_RATE (scripts/bench.sh).
    if environment["BENCH_ONLY"] == "load" {
        let section = try loadReport(functionDirectory: functionDirectory, environment: environment)
        try ("# Benchmarks (load section only)\n" + section).write(toFile: output, atomically: true, encoding: .utf8)
        print(section)
        exit(0)
    }

    // `BENCH_ONLY=push`: the fan-out by device count and the sweep's backlog throughput (docs/behaviour.md#sweep), nothing else.
    // While working on the sender: `BENCH_PUSH_COUNTS=1,1000` (the device counts), `BENCH_PUSH_SWEEP=0` (no sweep),
    // `BENCH_STAND_IN=in-process` (the emulator among this process's threads, as before).
    if environment["BENCH_ONLY"] == "push" {
        var fanOutBenchmark = FanOutBenchmark(
            databaseURL: databaseURL,
            deviceCounts: environment["BENCH_PUSH_COUNTS"].map { $0.split(separator: ",").compactMap { Int($0) } }
                ?? [1, 10, 100, 250, 1000], repetitions: 5, delayMilliseconds: delay,
            peer: .unavailable(reason: "not run with BENCH_ONLY=push"), peerAPIs: [])
        if environment["BENCH_STAND_IN"] == "in-process" { fanOutBenchmark.standIn = .inProcess }
        let rows = try fanOutBenchmark.run()
        var section = """

            ## Push fan-out and backlog (BENCH_ONLY=push)

            FCM emulator over TLS + ALPN h2 answering after \(delay) ms, 100 streams per connection, \
            \(fanOutBenchmark.standIn == .process ? "in a process of its own" : "in the bench's process"). Medians of 5
            rounds after a warm-up round; ratio against the 1-device median of the same run.

            | devices | median ms | × 1-device | connections used | max streams on one |
            |---:|---:|---:|---:|---:|

            """
        for row in rows {
            section += String(
                format: "| %d | %.1f | %.2f | %d | %d |\n", row.devices, row.medianMilliseconds,
                row.medianMilliseconds / rows[0].medianMilliseconds, row.connections, row.maxConcurrentStreams)
        }
        section += fanOutCPUTable(rows)
        print(section)
        if environment["BENCH_PUSH_SWEEP"] == "0" {
            try ("# Benchmarks (push section only)\n" + section).write(
                toFile: output, atomically: true, encoding: .utf8)
            exit(0)
        }
        let sweep = try DurablePushBenchmark(binDirectory: functionDirectory, databaseURL: databaseURL)
            .sweepVersusFanOut(deliveries: 10_000, delayMilliseconds: delay, rounds: 2)
        section += String(
            format: """

                push-sweep over %d due deliveries (default PUSH_SWEEP_BATCH_SIZE and PUSH_SWEEP_SEND_RATE): %.0f
                deliveries/s (%d leases); one dispatch fanning out to all of them: %.0f/s.

                """, sweep.deliveries, sweep.sweepPerSecond, sweep.sweepBatches, sweep.fanOutPerSecond)
        section += sweepCPUParagraph(sweep)
        try ("# Benchmarks (push section only)\n" + section).write(toFile: output, atomically: true, encoding: .utf8)
        print(section)
        exit(0)
    }

    let peer = FirebaseAdminPeer.Availability.fromEnvironment(environment, repetitions: 5)
    let peerAPIs = ["send_each", "send_each_async"]
    let fanOut = try FanOutBenchmark(
        databaseURL: databaseURL, deviceCounts: [1, 10, 100, 1000], repetitions: 5, delayMilliseconds: delay,
        peer: peer,
        peerAPIs: peerAPIs
    ).run()
    let baseline = fanOut[0].medianMilliseconds
    // The same fan-out with nghttpx (a TLS + HTTP/2 front that is not ours) in front of the emulator.
    var frontBenchmark = FanOutBenchmark(
        databaseURL: databaseURL, deviceCounts: [1, 100], repetitions: 5, delayMilliseconds: delay,
        peer: .unavailable(reason: "not run behind nghttpx"), peerAPIs: [])
    frontBenchmark.front = .nghttpx
    let behindFront = try frontBenchmark.run()

    var report = """
        # Benchmarks

        Generated by `make bench` (`scripts/bench.sh`: release build, throwaway PostgreSQL with PL/pgSQL preloaded as
        Supabase's image preloads it, in-process FCM emulator).
        Machine: \(ProcessInfo.processInfo.activeProcessorCount) cores, \
        \(ProcessInfo.processInfo.physicalMemory / 1_073_741_824) GiB, \(ProcessInfo.processInfo.operatingSystemVersionString).
        Generated at \(Timestamp.rfc3339UTC(Date())).

        ## Push fan-out

        One dose event dispatched to N enabled devices (lease the outbox rows, send, record outcomes; the outbox is
        written first, untimed, as the recording transaction does), the FCM emulator answering each `messages:send`
        after \(delay) ms over TLS with ALPN h2, as `fcm.googleapis.com` does (a throwaway CA made at start, trusted
        through `SSL_CERT_FILE`; the emulator allows 100 concurrent streams per connection, as Google does). The
        emulator runs in a process of its own (the bench executable started again as `bench --fcm-stand-in`), so
        that its TLS, HTTP/2 and timers are not the sender's threads' neighbours and its CPU is read apart. One
        process, one `CurlClient` kept across rounds, as a warm function keeps it. Median of 5 runs after a warm-up
        run that mints the access token and opens the connections. Ratio: against the 1-device median of the same
        run. Connections: those the last round's sends arrived on (the emulator's count); streams: the most sends in
        flight on one connection at once.

        | devices | median ms | × 1-device | connections used | max streams on one | all HTTP/2 |
        |---:|---:|---:|---:|---:|:---:|

        """
    for row in fanOut {
        report += String(
            format: "| %d | %.1f | %.2f | %d | %d | %@ |\n", row.devices, row.medianMilliseconds,
            row.medianMilliseconds / baseline, row.connections, row.maxConcurrentStreams, row.allHTTP2 ? "yes" : "no")
    }
    report += """

        **Behind nghttpx**: the same fan-out with nghttpx (the nghttp2 project's proxy: TLS, ALPN h2, 100 concurrent
        streams per connection, as Google's front allows) in front of the emulator's plain HTTP/1.1 listener, which
        answers after \(delay) ms. Connections: the client ports of the last round's sends in nghttpx's access log.

        | devices | median ms | × 1-device | connections used | all HTTP/2 |
        |---:|---:|---:|---:|:---:|

        """
    for row in behindFront {
        report += String(
            format: "| %d | %.1f | %.2f | %d | %@ |\n", row.devices, row.medianMilliseconds,
            row.medianMilliseconds / behindFront[0].medianMilliseconds, row.connections, row.allHTTP2 ? "yes" : "no")
    }
    report += fanOutCPUTable(fanOut)
    let docsDirectory = URL(fileURLWithPath: output).deletingLastPathComponent()
    let fanOutReport = FanOutReport(rows: fanOut, peer: peer, peerAPIs: peerAPIs, delayMilliseconds: delay)
    report += fanOutReport.markdown(chartFile: "benchmarks-fanout.svg")
    try fanOutReport.chart().render().write(
        to: docsDirectory.appendingPathComponent("benchmarks-fanout.svg"), atomically: true, encoding: .utf8)
    var functionEnvironment = ProcessInfo.processInfo.environment
    functionEnvironment["SUPABASE_JWT_SECRET"] = String(repeating: "r", count: 40)
    functionEnvironment["PUSH_ENVIRONMENT"] = "DEV"
    functionEnvironment["LOG_LEVEL"] = "warning"
    let runner = try RunnerBenchmark(
        binDirectory: binDirectory, functionDirectory: functionDirectory, environment: functionEnvironment, requests: 30
    ).run()
    let direct = runner[0].medianMilliseconds
    report += """

        ## push-register through the runner

        Median of 30 sequential requests (after one untimed request), the same database, the same run. Ratio: against
        the direct stdin invocation (timed to stdout's EOF), which pays a process start and a database connection per
        request, as a cold function does.

        Warm, CPU per request (over the timed requests; each thread's `schedstat` in procfs): the runner's own
        process (the gateway: HTTP in and out, the event, the worker's Runtime API) and its children (the function's
        warm workers).

        | path | median ms | × direct stdin | runner process CPU ms per request | workers' CPU ms per request |
        |---|---:|---:|---:|---:|

        """
    for row in runner {
        let cpu = [row.gatewayCPUMilliseconds, row.workersCPUMilliseconds].map {
            $0.map { String(format: "%.2f", $0) } ?? ""
        }
        report += String(
            format: "| %@ | %.1f | %.2f | %@ | %@ |\n", row.path, row.medianMilliseconds,
            row.medianMilliseconds / direct,
            cpu[0], cpu[1])
    }
    let floors = FloorBenchmark(
        databaseURL: databaseURL, pgbench: environment["BENCH_PGBENCH"],
        trivialBinary: environment["BENCH_TRIVIAL_BINARY"])
    let pgbench = try floors.pgbenchConnectPerTransaction(transactions: 200)
    let trivial = try floors.trivialProcessStart(runs: 30)
    // The three paths and, when measured, the two floors, on one axis.
    var registerLabels = ["stdin (cold)", "runner cold", "runner warm", "runner warm, kept-alive", "/healthz hop"]
    var registerValues: [Double?] = runner.map(\.medianMilliseconds)
    var floorValues: [Double?] = runner.map { _ in nil }
    if let pgbench, let trivial {
        registerLabels += ["pgbench -C", "process start"]
        registerValues += [nil, nil]
        floorValues += [pgbench, trivial]
    }
    try SVGBarChart(
        title: "push-register: one request, three paths and two floors",
        subtitle: "Median ms (pgbench: average), the same run and database; lower is better.", xLabel: "path",
        yLabel: "ms", categories: registerLabels,
        series: [
            .init(name: "push-register", color: "#2b6cb0", values: registerValues),
            .init(name: "floor (what no cold function can beat)", color: "#a0aec0", values: floorValues),
        ], valueFormat: "%.1f"
    ).render().write(
        to: docsDirectory.appendingPathComponent("benchmarks-push-register.svg"), atomically: true, encoding: .utf8)
    report += "\n![push-register median ms by path, with its floors](benchmarks-push-register.svg)\n"
    if let pgbench, let trivial {
        report += String(
            format: """

                ## Cold push-register against its floors

                The direct stdin invocation above against what no cold function can beat, in the same run: the same
                register transaction through `pgbench -C` (a new connection per transaction; average of 200), and
                starting a trivial statically linked C program until its stdout closes (median of 30, same harness).

                | | ms | push-register is × this |
                |---|---:|---:|
                | pgbench -C, register transaction | %.2f | %.1f |
                | trivial static process start | %.2f | %.1f |
                | both floors together | %.2f | %.1f |
                | push-register, stdin (from above) | %.1f | 1.0 |

                """, pgbench, direct / pgbench, trivial, direct / trivial, pgbench + trivial,
            direct / (pgbench + trivial),
            direct)
    }
    let functions = FunctionBenchmarks(binDirectory: functionDirectory, databaseURL: databaseURL)
    let latency = try functions.responseVersusPush(runs: 5)
    report += String(
        format: """

            ## The response does not wait for the push

            `dose-record` through stdin/stdout, median of 5: time until stdout's EOF (what a host waits for) for a
            patient whose caregiver has a device while the FCM emulator answers after 2 s, against a patient with no
            device at all. The process itself ends only after the push (exit column).

            | case | stdout EOF ms | × no device | process exit ms |
            |---|---:|---:|---:|
            | no device (no push) | %.1f | 1.00 | — |
            | one device, FCM answering after 2000 ms | %.1f | %.2f | %.1f |

            """, latency.withoutPush, latency.withPush, latency.withPush / latency.withoutPush, latency.exitWithPush)
    let durable = DurablePushBenchmark(binDirectory: functionDirectory, databaseURL: databaseURL)
    let outbox = try durable.outboxCost(runs: 30)
    report += """

        ## The outbox in the recording transaction

        `dose-record` through stdin/stdout, time to stdout's EOF, median of 30 runs (after one untimed round), the
        three patients interleaved run by run. Each run records a new dose, so its transaction also writes the push
        event and one PENDING delivery per recipient device (the outbox); the push is sent after the EOF and is not
        timed. Goal: ≤ 1.10 × the patient with no device.

        | recipient devices | median ms to response | × no device |
        |---:|---:|---:|

        """
    for row in outbox {
        report += String(
            format: "| %d | %.1f | %.3f |\n", row.devices, row.medianMilliseconds,
            row.medianMilliseconds / outbox[0].medianMilliseconds)
    }
    let sweepResult = try durable.sweepVersusFanOut(deliveries: 10_000, delayMilliseconds: delay, rounds: 2)
    report += String(
        format: """

            ## push-sweep throughput

            %d due deliveries to %d devices, the FCM emulator (in a process of its own) answering each
            `messages:send` after %d ms (TLS with ALPN h2, 100 streams per connection). Baseline: one recording's post-response dispatch fanning out to all
            of them (in-process: lease, send, record). Against it: one `push-sweep` process (start to stdout EOF) over
            an event owing the same devices, leasing `PUSH_SWEEP_BATCH_SIZE` at a time with the next lease taken while
            the last is in flight (%d leases), paced by the default `PUSH_SWEEP_SEND_RATE` (8,000/s). Alternated, %d
            rounds, medians. Goals: ≥ 5,000 deliveries/s (half of FCM's 600k/min project quota) and ≥ 0.80 × one
            dispatch.

            | sender | deliveries / s | × one dispatch |
            |---|---:|---:|
            | one dispatch, fan-out to all | %.0f | 1.00 |
            | push-sweep, batched | %.0f | %.2f |

            """, sweepResult.deliveries, sweepResult.deliveries, delay, sweepResult.sweepBatches, sweepResult.rounds,
        sweepResult.fanOutPerSecond, sweepResult.sweepPerSecond,
        sweepResult.sweepPerSecond / sweepResult.fanOutPerSecond)
    report += sweepCPUParagraph(sweepResult)
    report += senderLeversNote
    let mints = try functions.concurrentColdMints(invocations: 20)
    report += """

        ## One OAuth token for concurrent cold starts

        20 `dose-record` processes started at once, each with a device to push to, against an empty token cache
        (a new service account): the emulator minted **\(mints)** access token(s) for the 20 invocations.

        """
    // Start-up: the shipped artifacts against C floors (start-up, Runtime API, peak memory, sizes, a profile), before
    // the device table grows push_devices to 1M rows (as `BENCH_ONLY=startup` runs it).
    let startup = try startupSection(databaseURL: databaseURL, environment: environment)
    report += startup.markdown
    let table = try DeviceTableBenchmark(databaseURL: databaseURL, registrations: 200).run()
    report += deviceTableSection(
        table, cold: try coldRegisterBySize(databaseURL: databaseURL, environment: environment))
    report += try poolerSection(binDirectory: functionDirectory, databaseURL: databaseURL, environment: environment)

    // The goals in one table, placed right after the header.
    var summary = startupGoals(startup.figures)
    let front100 = behindFront.first { $0.devices == 100 }
    summary.ratio(
        "fan-out to 100 devices ÷ 1 device, behind nghttpx (TLS + HTTP/2), FCM answering in \(delay) ms",
        before: "1.26", now: front100.map { $0.medianMilliseconds / behindFront[0].medianMilliseconds },
        atMost: 1.2, section: "Push fan-out (behind nghttpx)",
        whereTimeGoes: front100.map { row in
            String(
                format: "per round at 100 devices (%.1f ms): the sender %.1f ms of CPU, nghttpx (TLS, HTTP/2 and its "
                    + "HTTP/1.1 hop) %.1f ms, the emulator behind it %.1f ms, the 2 cores %.0f%% busy; at 1 device "
                    + "%.1f ms: past one %d ms round trip, the 100 requests' CPU on 2 shared cores",
                row.medianMilliseconds, row.dispatcherCPUMilliseconds, row.frontCPUMilliseconds,
                row.emulatorCPUMilliseconds, 100 * row.machineBusy, behindFront[0].medianMilliseconds, delay)
        })
    summary.count(
        "fan-out: connections used for 100 devices (100 streams allowed per connection)", before: "1",
        now: fanOut.first { $0.devices == 100 }.map { Double($0.connections) }, goal: "1", met: { $0 <= 1 },
        section: "Push fan-out")
    let thousand = fanOut.first { $0.devices == 1000 }
    // Where a fan-out's or a sweep's wall time goes, when its goal is missed: the sender's CPU, the stand-in's, and
    // how busy the 2 cores were (PostgreSQL's work is the rest).
    let fanOutWhere = thousand.map { row in
        String(
            format: "the sender %.0f ms of CPU, the FCM stand-in (its own process) %.0f ms, the 2 cores %.0f%% busy: "
                + "beyond one 50 ms round trip the fan-out waits for CPU",
            row.dispatcherCPUMilliseconds, row.emulatorCPUMilliseconds, 100 * row.machineBusy)
    }
    summary.ratio(
        "fan-out 1,000 ÷ 1 device", before: "13.70",
        now: thousand.map { $0.medianMilliseconds / baseline }, atMost: 2,
        section: "Push fan-out", whereTimeGoes: fanOutWhere)
    summary.count(
        "the sender's own CPU per delivered message at 1,000 devices, µs (the FCM stand-in's CPU apart)",
        before: "107", now: thousand?.dispatcherMicrosecondsPerMessage, goal: "≤ 54 (half)", met: { $0 <= 54 },
        section: "Push fan-out",
        whereTimeGoes: "libc's malloc/free, libcurl with nghttp2 and OpenSSL, and the kernel's send/receive/poll: "
            + "the levers' note under push-sweep throughput")
    let sweepShare = sweepResult.sweepCPU
    summary.count(
        "`push-sweep` draining a 10,000-delivery backlog, deliveries/s, FCM answering in \(delay) ms",
        before: "3,116", now: sweepResult.sweepPerSecond, goal: "≥ 5,000", met: { $0 >= 5000 },
        section: "push-sweep throughput",
        whereTimeGoes: String(
            format: "push-sweep %.0f ms of CPU (%.0f µs per delivery), the FCM stand-in %.0f ms, the 2 cores "
                + "%.0f%% busy in a %.0f ms round: the sender, the stand-in and PostgreSQL share 2 cores; at this "
                + "round's CPU per delivery, all processes together, 2 fully busy cores would carry at most %.0f/s, "
                + "and push-sweep's own CPU alone allows %.0f/s per core",
            sweepShare.childMilliseconds, 1000 * sweepShare.childMilliseconds / Double(max(sweepResult.deliveries, 1)),
            sweepResult.standInMilliseconds, 100 * sweepShare.machineBusy, sweepShare.wallMilliseconds,
            Double(sweepResult.deliveries) * 1000 / max(sweepShare.machineBusy * sweepShare.wallMilliseconds, 1),
            Double(sweepResult.deliveries) * 1000 / max(sweepShare.childMilliseconds, 1)))
    let keptRow = runner.first { $0.path.hasPrefix("HTTP, one kept-alive connection → runner") }
    let warmRunner = keptRow?.medianMilliseconds
    let hop = runner.first { $0.path.contains("/healthz") }?.medianMilliseconds
    summary.ratio(
        "warm invocation through the runner (HTTP, kept-alive) ÷ the same function warm on the Runtime API",
        before: "1.40",
        now: warmRunner.flatMap { ms in startup.figures.map { ms / $0.runtimeWarm.ours } }, atMost: 1.3,
        section: "push-register through the runner; Start-up against C",
        whereTimeGoes: keptRow.flatMap { row in
            guard let gateway = row.gatewayCPUMilliseconds, let workers = row.workersCPUMilliseconds,
                let runtime = startup.figures?.runtimeWarm.ours
            else { return nil }
            return String(
                format: "per request (%.2f ms against %.2f on the Runtime API): the runner's own process %.2f ms of "
                    + "CPU (HTTP in and out, the event, the worker's Runtime API), the worker %.2f ms, the HTTP hop "
                    + "alone (`/healthz`) %.2f ms; the rest is waiting (PostgreSQL, the hops between the processes)",
                row.medianMilliseconds, runtime, gateway, workers, hop ?? 0)
        })
    report += try loadReport(functionDirectory: functionDirectory, environment: environment)
    if let headerEnd = report.range(of: "\n## Push fan-out\n") {
        report.insert(contentsOf: summary.markdown, at: headerEnd.lowerBound)
    } else {
        report += summary.markdown
    }
    try report.write(toFile: output, atomically: true, encoding: .utf8)
    print(report)
} catch {
    FileHandle.standardError.write(Data("bench failed: \(String(reflecting: error))\n".utf8))
    exit(1)
}

/// The goals' table's start-up rows (`BENCH_ONLY=startup` prints them alone).
func startupGoals(_ figures: StartupFigures?) -> FloorSummary {
    var summary = FloorSummary()
    // Last round's figures are against the earlier floors (the token unchecked): compare them with `earlier`.
    summary.ratio(
        "cold `push-register`, stdin → stdout EOF ÷ C + libpq + the token's check", before: "1.49",
        now: figures?.cold.ratio, atMost: 1.2, section: "Start-up against C", earlier: figures?.cold.earlierRatio,
        whereTimeGoes: figures?.coldWhere)
    summary.ratio(
        "Lambda cold, process start → first response posted ÷ C + libpq + libcurl + the token's check",
        before: "1.35", now: figures?.runtimeCold.ratio, atMost: 1.2, section: "Start-up against C",
        earlier: figures?.runtimeCold.earlierRatio,
        whereTimeGoes: figures?.coldWhere.map { "as the cold registration's: \($0)" })
    summary.ratio(
        "Lambda warm invocation ÷ the C runtime loop (the token's check and the upsert)", before: "2.33",
        now: figures?.runtimeWarm.ratio, atMost: 1.5, section: "Start-up against C",
        earlier: figures?.runtimeWarm.earlierRatio, whereTimeGoes: figures?.warmWhere)
    summary.ratio(
        "peak RSS of a registration ÷ C", before: "2.48", now: figures?.resident?.ratio, atMost: 1.5,
        section: "Start-up against C", whereTimeGoes: figures?.residentWhere)
    return summary
}

/// Where a fan-out's wall time goes, in CPU, per device count; the sender's own CPU per message.
func fanOutCPUTable(_ rows: [FanOutBenchmark.Row]) -> String {
    var text = """

        **Where the fan-out's time goes** (medians per timed round): CPU of the dispatching thread (leasing, building
        the messages, libcurl with its TLS and HTTP/2, recording the outcomes), the same per message delivered (the
        sender's own cost per message), CPU of the FCM stand-in (the emulator's process: TLS, HTTP/2, its 50 ms
        timers; getrusage in that process), and the machine's 2 cores busy (PostgreSQL's work is the rest).

        | devices | median ms | dispatcher CPU ms | dispatcher CPU µs per message | FCM stand-in CPU ms | cores busy |
        |---:|---:|---:|---:|---:|---:|

        """
    for row in rows {
        text += String(
            format: "| %d | %.1f | %.1f | %.0f | %.1f | %.0f%% |\n", row.devices, row.medianMilliseconds,
            row.dispatcherCPUMilliseconds, row.dispatcherMicrosecondsPerMessage, row.emulatorCPUMilliseconds,
            100 * row.machineBusy)
    }
    return text
}

/// Where the last sweep round's wall time went, in CPU.
func sweepCPUParagraph(_ sweep: DurablePushBenchmark.SweepResult) -> String {
    let share = sweep.sweepCPU
    return String(
        format: """

            **Where the sweep's time goes** (its last round, %.0f ms): push-sweep's own CPU %.0f ms (%.0f%% of one
            core; %.0f µs per delivery), the FCM stand-in's (its own process: TLS, HTTP/2) %.0f ms, the bench
            process's %.0f ms, and the machine's 2 cores %.0f%% busy in all (PostgreSQL's work is the rest). The
            stand-in, the sweep and the database share the 2 cores: what one machine can push through here is a floor
            on the sender, not FCM's speed.

            """, share.wallMilliseconds, share.childMilliseconds,
        100 * share.childMilliseconds / share.wallMilliseconds,
        1000 * share.childMilliseconds / Double(max(sweep.deliveries, 1)), sweep.standInMilliseconds,
        share.selfMilliseconds, 100 * share.machineBusy)
}

/// Transaction pooling: cold push-register and a 200-invocation burst, through PgBouncer against directly.
func poolerSection(binDirectory: URL, databaseURL: String, environment: [String: String]) throws -> String {
    guard let poolerURL = environment["BENCH_POOLER_URL"] else {
        return "\n## Behind PgBouncer\n\nNot measured: BENCH_POOLER_URL is not set (scripts/bench.sh starts it).\n"
    }
    let poolSize = environment["BENCH_POOLER_POOL_SIZE"] ?? "?"
    let maxConnections = environment["PG_MAX_CONNECTIONS"] ?? "?"
    let benchmark = PoolerBenchmark(binDirectory: binDirectory, databaseURL: databaseURL, poolerURL: poolerURL)
    let cold = try benchmark.coldRegister(runs: 40)
    let burst = try benchmark.burst(invocations: 200, rounds: 3)
    return String(
        format: """

            ## Behind PgBouncer (transaction pooling)

            The functions with `DATABASE_URL` at PgBouncer 1.18 (Debian's package; `pool_mode = transaction`,
            `default_pool_size = %@`, on 127.0.0.1, `scripts/pgbouncer.sh`) against the same PostgreSQL directly
            (`max_connections = %@`: enough for every direct client), in one run.

            **Cold push-register**: a process per request, each registering a new device token, timed to stdout's EOF;
            median of %d per path after one untimed request each, the paths alternated request by request. Through the
            pooler a cold process skips PostgreSQL's backend start-up (fork, authentication, catalog caches: the pool's
            server connections are already open) and pays one more hop on each of its statements' round trips.

            | path | median ms | × direct |
            |---|---:|---:|
            | direct to PostgreSQL | %.2f | 1.00 |
            | through PgBouncer | %.2f | %.2f |

            **%d concurrent cold invocations**: `dose-record` processes released at the same instant, each recording a
            new dose with one device to push to (the FCM emulator answering after 50 ms), %d rounds per path,
            alternated; latency of each invocation from the release to its stdout's EOF, all rounds together. Peak
            server connections: client backends seen in `pg_stat_activity` (sampled every 5 ms, the benchmark's own
            seeding connection included).

            | path | median ms | p99 ms | max ms | not 200 | peak server connections |
            |---|---:|---:|---:|---:|---:|
            | direct to PostgreSQL | %.1f | %.1f | %.1f | %d | %d |
            | through PgBouncer | %.1f | %.1f | %.1f | %d | %d |
            | **PgBouncer ÷ direct** | **%.2f** | **%.2f** | %.2f | | |

            """, poolSize, maxConnections, cold.runs, cold.directMilliseconds, cold.pooledMilliseconds,
        cold.pooledMilliseconds / cold.directMilliseconds, burst.invocations, burst.rounds,
        burst.direct.medianMilliseconds, burst.direct.p99Milliseconds, burst.direct.maximumMilliseconds,
        burst.direct.failures, burst.peakServerConnectionsDirect, burst.pooled.medianMilliseconds,
        burst.pooled.p99Milliseconds, burst.pooled.maximumMilliseconds, burst.pooled.failures,
        burst.peakServerConnectionsPooled, burst.pooled.medianMilliseconds / burst.direct.medianMilliseconds,
        burst.pooled.p99Milliseconds / burst.direct.p99Milliseconds,
        burst.pooled.maximumMilliseconds / burst.direct.maximumMilliseconds)
}

import Foundation

/// The load section's markdown (``LoadBenchmark``).
func loadSection(
    _ runs: [LoadBenchmark.Run], options: LoadBenchmark.Options, seconds: Double,
    title: String = "The whole recording under load"
) -> String {
    let changed =
        options.settings.isEmpty
        ? ""
        : " Settings changed from the deployment's for this run: "
            + options.settings.sorted { $0.key < $1.key }.map { "`\($0.key)=\($0.value)`" }.joined(separator: ", ")
            + "."
    var text = String(
        format: """

            ## %@

            The production host as the container image runs it (`gateway serve --mode warm` with the image's options:
            per-client limits 512 connections and 16 requests, the client read from `X-Forwarded-For`), release build,
            the shipped functions (the zips of `make release`) with the deployment's settings (infra/knative), against a
            PostgreSQL of its own with default durability (fsync, synchronous commit and full-page writes on) and
            `pg_stat_statements`; FCM is the emulator in a process of its own behind nghttpx (TLS, ALPN h2, 100 streams
            a connection), answering at once and 503 to one first attempt in %d; push-sweep starts every %.0f s (the
            first at once) and stays for its time limit, as the CronJob runs it. An open-loop client (`Tests/Benchmarks/c/loadgen.c`: one thread, epoll, keep-alive
            HTTP/1.1) records doses, slots and PRNs (dose-record : slot-bulk-record : prn-record = 2:1:1; half the
            doses by a caregiver) for %d households with %d devices in all, fresh households for each rate, each
            recording owing a new event, each household its own client address; %.0f s per rate, evenly spaced.%@

            - **HTTP**: from each request's intended send time in the schedule to its answer (a stall counts against
              every request it delayed); all answers, whatever their status; **200s' p99** over the answers 200 alone
              (what the host took on while it shed the rest with 503 and `Retry-After`).
            - **achieved**: recordings answered 200 per second, from the first intended send to the last answer.
            - **time to push**: from the recording's answer to the stand-in accepting the delivery (its first 200 for
              that device and event), over every delivery owed; after the load, the run waits until nothing is owed
              (at most %.0f s, so a delivery left to the sweep is counted when the sweep sends it).
            - **misses / duplicates**: every enabled device of every linked caregiver but the recording one is owed one
              push per recorded event; a miss is one never accepted, a duplicate one accepted more than once.
            - **CPU per recording** (ms, per recording answered 200, over the run and its settling): the gateway, its
              function workers and push-sweep (each thread's `schedstat` of the process trees, and what their exited
              processes used; the workers' share and push-sweep's also on their own), PostgreSQL (the postmaster and all its children, the bench's own connection taken out), the
              load generator, the FCM stand-in, nghttpx. **machine**: every process on the machine (/proc/stat), anyone else's included; a
              machine figure well above the sum of ours means other work shared the cores.

            | target rec/s | Retry-After | achieved rec/s | HTTP p50/p99/max ms | 200s' p99 ms | 503 | other / none | time to push p50/p99/max ms | owed | misses | duplicates | stand-in 503s | settle s | gateway + functions | of which the functions | of which push-sweep | PostgreSQL | load generator | FCM stand-in | nghttpx | machine |
            |---:|:---:|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|

            """, title, options.failFirstEvery, options.sweepIntervalSeconds, options.households, options.devices,
        options.seconds, changed, options.settleLimitSeconds)
    for run in runs {
        let cpu = run.cpu
        text += String(
            format:
                "| %d | %@ | %.1f | %.0f/%.0f/%.0f | %.0f | %d | %d / %d | %.0f/%.0f/%.0f | %d | %d | %d | %d | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
            run.targetRate, run.retryAfter ? "1 s" : "none", run.achievedRate, run.httpP50, run.httpP99, run.httpMax,
            run.acceptedP99, run.unavailable, run.otherStatus, run.unanswered, run.pushP50, run.pushP99, run.pushMax,
            run.owed,
            run.misses, run.duplicates, run.injectedFailures, run.settleSeconds,
            run.perRecording(cpu.gateway + cpu.sweep), run.perRecording(cpu.functions), run.perRecording(cpu.sweep),
            run.perRecording(cpu.postgres), run.perRecording(cpu.loadGenerator),
            run.perRecording(cpu.standIn), run.perRecording(cpu.nghttpx), run.perRecording(cpu.machine))
    }
    text +=
        "\nPer run: recordings scheduled, client connections opened, push-sweep runs, deliveries sent that no "
        + "recording owed, and the cores busy (ours, then the machine's, over the run and its settling).\n\n"
        + "| target rec/s | Retry-After | scheduled | connections | sweeps | unowed sends | ours busy | machine busy |\n"
        + "|---:|:---:|---:|---:|---:|---:|---:|---:|\n"
    for run in runs {
        let cpu = run.cpu
        let ours = cpu.gateway + cpu.postgres + cpu.sweep + cpu.loadGenerator + cpu.standIn + cpu.nghttpx
        text += String(
            format: "| %d | %@ | %d | %d | %d | %d | %.2f | %.2f |\n", run.targetRate,
            run.retryAfter ? "1 s" : "none", run.scheduled, run.connections, run.sweepRuns, run.unexpected,
            ours / max(cpu.wallMilliseconds, 1), cpu.machine / max(cpu.wallMilliseconds, 1))
    }
    for run in runs {
        text += String(
            format: """

                **PostgreSQL's statements at %d rec/s%@** (`pg_stat_statements`, the functions' role, reset before the
                run; total = execution + planning, ms):

                | calls | total ms | mean ms | of which planning ms | plans | rows | statement |
                |---:|---:|---:|---:|---:|---:|---|

                """, run.targetRate, run.retryAfter ? " with Retry-After: 1" : "")
        for statement in run.statements {
            text += String(
                format: "| %d | %.0f | %.3f | %.0f | %d | %d | %@`%@` |\n", statement.calls,
                statement.totalMilliseconds, statement.meanMilliseconds, statement.planMilliseconds, statement.plans,
                statement.rows, statement.topLevel ? "" : "inside a call: ", statementText(statement.query))
        }
    }
    text += String(format: "\nThe section took %.0f s.\n", seconds)
    return text
}

/// A statement's text on one line of a table cell: whitespace collapsed, pipes and backticks escaped, at most 200
/// characters. `pg_stat_statements` shows constants as `$n`, so no value the functions bound is in it.
private func statementText(_ query: String) -> String {
    let words = query.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" }).joined(separator: " ")
    let cut = words.count > 200 ? String(words.prefix(200)) + "…" : words
    return cut.replacingOccurrences(of: "|", with: "\\|").replacingOccurrences(of: "`", with: "'")
}

/// Runs the load section when scripts/bench.sh prepared it (its database, the gateway, the client), else says why not.
func loadReport(functionDirectory: URL, environment: [String: String]) throws -> String {
    guard let url = environment["BENCH_LOAD_DATABASE_URL"], let gateway = environment["BENCH_GATEWAY"],
        let client = environment["BENCH_LOADGEN"]
    else {
        return "\n## The whole recording under load\n\nNot measured: BENCH_LOAD_DATABASE_URL, BENCH_GATEWAY or "
            + "BENCH_LOADGEN is not set (scripts/bench.sh prepares them).\n"
    }
    let options = LoadBenchmark.Options(environment: environment)
    func measure(_ options: LoadBenchmark.Options, title: String) throws -> String {
        let start = ContinuousClock.now
        let runs = try LoadBenchmark(
            databaseURL: url, gateway: gateway, functionDirectory: functionDirectory, loadGenerator: client,
            peakResidentHelper: environment["BENCH_C_DIRECTORY"].map { $0 + "/peak-rss" }, options: options
        ).run()
        return loadSection(
            runs, options: options, seconds: benchMilliseconds(ContinuousClock.now - start) / 1000, title: title)
    }
    var text = try measure(options, title: "The whole recording under load")
    // The lever the deployment does not pull, measured beside it: a direct connection, whose statements may be
    // prepared (behind a transaction pooler they may not: docs/deploy.md#connection-pooling).
    // BENCH_LOAD_DIRECT_RATES (100,300 by default; 0: not run).
    let directRates = (environment["BENCH_LOAD_DIRECT_RATES"] ?? "100,300").split(separator: ",").compactMap {
        Int($0.trimmingCharacters(in: .whitespaces))
    }.filter { $0 > 0 }
    if options.settings.isEmpty, !directRates.isEmpty {
        var direct = options
        direct.rates = directRates
        direct.retryAfterRate = nil
        direct.settings = ["DATABASE_PREPARED_STATEMENTS": "on"]
        text += try measure(direct, title: "The whole recording under load, on a direct connection")
    }
    return text
}

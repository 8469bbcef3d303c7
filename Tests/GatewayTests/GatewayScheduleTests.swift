import Codecs
import CaregiverPush
import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// The gateway (under `runner serve`) running scheduled functions (like `push-sweep`) at their rate, cold and warm, with script
/// functions standing in for the real one.
@Suite("gateway schedules")
struct GatewayScheduleTests {
    static let modes = ["cold", "warm"]

    /// A summary in push-sweep's shape, with one text member the gateway must never log.
    static let summary = #"{"leased":3,"sent":2,"failed":1,"note":"opaque-text-7f3a"}"#

    /// `sweep` saves each event it gets (to `$SCRIPT_PID_DIR/events/`) and prints ``summary``; `slow-sweep` logs
    /// `start`/`end` lines with nanosecond times to `$SCRIPT_PID_DIR/runs`, answering between them and then working
    /// on for `slowSeconds` (its post-response work); `hello` is an ordinary routed function.
    static func functions(slowSeconds: String = "0.6") throws -> ScriptFunctions {
        let nextWithEvent = ScriptFunctions.next.replacingOccurrences(
            of: "-o /dev/null", with: #"-o "$TMPDIR_SCRIPT/event""#)
        let record = """
            record() {
              mkdir -p "$SCRIPT_PID_DIR/events"
              name="$(date +%s%N)-$$"
              cp "$1" "$SCRIPT_PID_DIR/events/.$name" && mv "$SCRIPT_PID_DIR/events/.$name" "$SCRIPT_PID_DIR/events/$name.json"
            }
            """
        let log = #"log() { echo "$1 $(date +%s%N)" >> "$SCRIPT_PID_DIR/runs"; }"#
        return try ScriptFunctions.make([
            "sweep": .init(
                body: """
                    \(record)
                    if [ -n "$AWS_LAMBDA_RUNTIME_API" ]; then
                      while true; do \(nextWithEvent); record "$TMPDIR_SCRIPT/event"; reply '\(summary)'; done
                    fi
                    cat > "$TMPDIR_SCRIPT/event"; record "$TMPDIR_SCRIPT/event"; echo '\(summary)'
                    """, timeoutSeconds: 5),
            "slow-sweep": .init(
                body: """
                    \(log)
                    if [ -n "$AWS_LAMBDA_RUNTIME_API" ]; then
                      while true; do \(ScriptFunctions.next); log start; reply '{"sent":0}'; sleep \(slowSeconds); log end; done
                    fi
                    cat > /dev/null; log start; echo '{"sent":0}'; exec > /dev/null; sleep \(slowSeconds); log end
                    """, timeoutSeconds: 5),
            "hello": .init(
                body: """
                    if [ -n "$AWS_LAMBDA_RUNTIME_API" ]; then
                      while true; do \(ScriptFunctions.next); reply '{"hello":"world"}'; done
                    fi
                    cat > /dev/null; echo '{"hello":"world"}'
                    """),
        ])
    }

    /// Rewrites the scripts' table: `scheduled` get `rate(1 minute)` and no route; the others keep `/test/<name>`.
    static func writeTable(_ scripts: ScriptFunctions, scheduled: Set<String>, routedToo: Set<String> = []) throws {
        let rows = ["sweep", "slow-sweep", "hello"].map { name in
            var trigger = scheduled.contains(name) ? #""schedule": "rate(1 minute)""# : ""
            if !scheduled.contains(name) || routedToo.contains(name) {
                trigger += (trigger.isEmpty ? "" : ", ") + #""method": "POST", "path": "/test/\#(name)""#
            }
            return #"{"name": "\#(name)", \#(trigger), "timeoutSeconds": 5, "memoryMB": 128, "concurrency": 2}"#
        }
        try #"{"functions": [\#(rows.joined(separator: ",\n"))]}"#.write(
            to: scripts.table, atomically: true, encoding: .utf8)
    }

    static func server(_ mode: String, _ scripts: ScriptFunctions, _ arguments: [String]) throws -> RunnerServer {
        var environment = testEnvironment()
        environment["SCRIPT_PID_DIR"] = scripts.directory.path
        return try RunnerServer(arguments: ["--mode", mode] + scripts.arguments + arguments, environment: environment)
    }

    /// The events `sweep` has saved, oldest first.
    static func events(_ scripts: ScriptFunctions) -> [Data] {
        let directory = scripts.directory.appendingPathComponent("events")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasSuffix(".json") }.sorted().compactMap {
            try? Data(contentsOf: directory.appendingPathComponent($0))
        }
    }

    /// `slow-sweep`'s `start`/`end` lines, in the order written.
    static func runs(_ scripts: ScriptFunctions) -> [(mark: String, nanoseconds: UInt64)] {
        let text = (try? String(contentsOf: scripts.directory.appendingPathComponent("runs"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ")
            guard parts.count == 2, let time = UInt64(parts[1]) else { return nil }
            return (String(parts[0]), time)
        }
    }

    /// Polls `condition` until it holds or `seconds` pass.
    static func eventually(within seconds: Double = 20, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            guard Date() < deadline else { return false }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return true
    }

    /// The gateway's `scheduled run` lines for `function`, parsed.
    static func runLogs(_ server: RunnerServer, function: String) -> [[String: JSONValue]] {
        server.stderr.split(separator: "\n").compactMap { line in
            guard let object = (try? JSONValue.parse(String(line)))?.objectValue,
                object["msg"] == .string("scheduled run"), object["function"] == .string(function)
            else { return nil }
            return object
        }
    }

    /// Checks one event against EventBridge's Scheduled Event (its documented members); returns its id.
    static func checkScheduledEvent(_ data: Data, function: String) -> String? {
        guard let event = (try? JSONValue.parse(Array(data)))?.objectValue else {
            Issue.record("the event is not a JSON object: \(String(decoding: data, as: UTF8.self))")
            return nil
        }
        #expect(
            Set(event.keys)
                == ["version", "id", "detail-type", "source", "account", "time", "region", "resources", "detail"])
        #expect(event["version"] == .string("0"))
        #expect(event["detail-type"] == .string("Scheduled Event"))
        #expect(event["source"] == .string("aws.events"))
        #expect(event["detail"] == .object([:]))
        let id = event["id"]?.stringValue ?? ""
        #expect(id.count == 36 && UUID(uuidString: id) != nil && id == id.lowercased())
        let account = event["account"]?.stringValue ?? ""
        #expect((try? /[0-9]{12}/.wholeMatch(in: account)) != nil)
        let region = event["region"]?.stringValue ?? ""
        #expect((try? /[a-z]+(-[a-z]+)+-[0-9]+/.wholeMatch(in: region)) != nil)
        #expect(event["resources"] == .array([.string("arn:aws:events:\(region):\(account):rule/\(function)")]))
        let time = event["time"]?.stringValue ?? ""
        #expect((try? /[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z/.wholeMatch(in: time)) != nil)
        let instant = Timestamp.parseRFC3339(time)
        #expect(instant.map { abs($0.timeIntervalSinceNow) < 300 } == true, "time \(time) is not now")
        return id
    }

    /// Every path a caller might guess for a scheduled function, with both methods: all 404 problems.
    static func expectUnreachable(_ server: RunnerServer, _ function: String) throws {
        for path in ["/\(function)", "/test/\(function)", "/2015-03-31/functions/\(function)/invocations"] {
            for method in ["GET", "POST"] {
                let answer = try server.request(
                    method, path, headers: ["content-type": "application/json"], body: method == "POST" ? "{}" : nil)
                #expect(answer.status == 404, "\(method) \(path)")
                #expect(answer.headers["content-type"] == "application/problem+json")
            }
        }
    }

    @Test(
        "a scheduled function runs again and again at the interval, with a Scheduled Event, and each run is logged",
        arguments: modes)
    func runsAtTheInterval(mode: String) throws {
        let scripts = try Self.functions()
        try Self.writeTable(scripts, scheduled: ["sweep"])
        let server = try Self.server(mode, scripts, ["--schedule-interval-ms", "300"])
        #expect(Self.eventually { Self.events(scripts).count >= 3 }, "three runs")
        let ids = Self.events(scripts).compactMap { Self.checkScheduledEvent($0, function: "sweep") }
        #expect(ids.count >= 3 && Set(ids).count == ids.count, "a fresh id per run")
        try Self.expectUnreachable(server, "sweep")
        #expect(try server.request("POST", "/test/hello", body: "{}").status == 200)
        #expect(Self.eventually { Self.runLogs(server, function: "sweep").count >= 3 }, "a log line per run")
        for line in Self.runLogs(server, function: "sweep") {
            #expect(line["outcome"] == .string("completed") && line["mode"] == .string(mode))
            #expect(line["output.json"] == .bool(true))
            #expect(line["summary.leased"] == .number(3) && line["summary.sent"] == .number(2))
            #expect(line["duration_ms"]?.numberValue != nil)
            #expect(UUID(uuidString: line["requestId"]?.stringValue ?? "") != nil, "the event's id tags the run")
        }
        // The output is opaque: its text is never logged, and it was not taken for (and answered as) a response.
        #expect(!server.stderr.contains("opaque-text-7f3a"))
        #expect(!server.stderr.contains("not a response"))
    }

    @Test("--no-schedules: no run in a window where several would come, and still no route to it", arguments: modes)
    func noSchedules(mode: String) throws {
        let scripts = try Self.functions()
        try Self.writeTable(scripts, scheduled: ["sweep"])
        let server = try Self.server(mode, scripts, ["--schedule-interval-ms", "100", "--no-schedules"])
        #expect(server.logs("\"msg\":\"schedules off\""))
        try Self.expectUnreachable(server, "sweep")
        #expect(try server.request("POST", "/test/hello", body: "{}").status == 200)
        Thread.sleep(forTimeInterval: 1.5)
        #expect(Self.events(scripts).isEmpty)
        #expect(Self.runLogs(server, function: "sweep").isEmpty)
    }

    @Test("a table giving one function both a route and a schedule is refused at start")
    func routeAndSchedule() throws {
        let scripts = try Self.functions()
        try Self.writeTable(scripts, scheduled: ["sweep"], routedToo: ["sweep"])
        let process = Process()
        process.executableURL = Executables.binDirectory.appendingPathComponent("runner")
        process.arguments = ["serve", "--port", "0"] + scripts.arguments
        process.environment = testEnvironment()
        let stderr = Pipe()
        process.standardError = stderr
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // A runner that took the table would serve until stopped: give it 10 s to refuse, then end it.
        let exited = Self.eventually(within: 10) { !process.isRunning }
        if !exited { process.terminate() }
        process.waitUntilExit()
        let text = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(exited && process.terminationStatus != 0, "the runner refused the table and exited")
        #expect(text.contains("function sweep has both a route and a schedule"), "\(text)")
    }

    @Test("a tick while the previous run (its post-response work included) is going is skipped", arguments: modes)
    func overlappingRunsSkipped(mode: String) throws {
        let scripts = try Self.functions()
        try Self.writeTable(scripts, scheduled: ["slow-sweep"])
        let server = try Self.server(mode, scripts, ["--schedule-interval-ms", "100"])
        #expect(Self.eventually { Self.runs(scripts).filter { $0.mark == "end" }.count >= 3 }, "three runs")
        let runs = Self.runs(scripts)
        // One run at a time: start, end, start, end, … in time order (two at once would put two starts together).
        #expect(runs.enumerated().allSatisfy { $1.mark == ($0 % 2 == 0 ? "start" : "end") }, "\(runs.map(\.mark))")
        #expect(zip(runs, runs.dropFirst()).allSatisfy { $0.nanoseconds <= $1.nanoseconds })
        #expect(server.logs("\"msg\":\"scheduled run skipped: the previous run is still going\""))
        #expect(server.stderr.contains("\"function\":\"slow-sweep\""))
    }

    @Test(
        "SIGTERM stops the schedule: the run in progress finishes within the grace period, none starts",
        arguments: modes)
    func drainStopsTheSchedule(mode: String) throws {
        let scripts = try Self.functions(slowSeconds: "0.3")
        try Self.writeTable(scripts, scheduled: ["slow-sweep"])
        let server = try Self.server(mode, scripts, ["--schedule-interval-ms", "100", "--grace-seconds", "4"])
        #expect(Self.eventually { Self.runs(scripts).contains { $0.mark == "end" } }, "a first run")
        #expect(server.stop(signal: SIGTERM) == 0)
        #expect(server.stderr.contains("\"msg\":\"stopped\""))
        #expect(!server.stderr.contains("grace period over"))
        Thread.sleep(forTimeInterval: 0.5)
        let runs = Self.runs(scripts)
        #expect(runs.last?.mark == "end", "every run that started has ended: \(runs.map(\.mark))")
    }
}

import Codecs
import Curl
import CaregiverPush
import Foundation
import TestFixtures
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A running `runner serve` process on a free loopback port, driven over real HTTP.
package final class RunnerServer {
    package let port: Int
    private let process: Process
    private let stderrBuffer = LockedData()

    /// - Parameters:
    ///   - arguments: extra `runner serve` arguments (`--mode warm`, `--functions …`, `--bin-dir …`).
    ///   - environment: the runner's environment (its functions inherit it).
    package init(arguments: [String], environment: [String: String]) throws {
        let process = Process()
        process.executableURL = Executables.binDirectory.appendingPathComponent("runner")
        let functions = TestDatabase.repositoryRoot.appendingPathComponent("infra/functions.json").path
        var all = ["serve", "--port", "0"]
        if !arguments.contains("--functions") { all += ["--functions", functions] }
        // A runner's `push-sweep` sweeps its whole database: in the shared test database it would send other tests'
        // deliveries. Schedules run only where a test asks for them.
        if !arguments.contains("--schedule-interval-ms") { all.append("--no-schedules") }
        process.arguments = all + arguments
        process.environment = environment
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = FileHandle.nullDevice
        let buffer = stderrBuffer
        try process.run()
        self.process = process
        buffer.drain(stderr.fileHandleForReading)
        guard let port = announcedPort(stdout) else {
            process.terminate()
            throw ServerError.didNotStart(String(decoding: buffer.value, as: UTF8.self))
        }
        self.port = port
    }

    deinit {
        defer { LeakCapture.record(stderrBuffer.value, source: "runner stderr") }
        guard process.isRunning else { return }
        // SIGTERM lets the runner stop its workers; SIGKILL only if it does not leave in time.
        kill(process.processIdentifier, SIGTERM)
        for _ in 0..<100 where process.isRunning { Thread.sleep(forTimeInterval: 0.05) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    package enum ServerError: Error { case didNotStart(String), noAnswer(String) }

    package var stderr: String { String(decoding: stderrBuffer.value, as: UTF8.self) }

    /// Whether the runner's stderr shows `text` within `seconds`: its log is read on another thread, so a line
    /// written just before an answer may arrive just after it.
    package func logs(_ text: String, within seconds: Double = 10) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !stderr.contains(text) {
            guard Date() < deadline else { return false }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return true
    }
    package var pid: Int32 { process.processIdentifier }

    package var client: RunnerClient { RunnerClient(port: port) }

    package func request(
        _ method: String, _ path: String, headers: [String: String] = [:], body: String? = nil,
        timeoutMilliseconds: Int = 30_000
    ) throws -> RunnerClient.Answer {
        try client.request(method, path, headers: headers, body: body, timeoutMilliseconds: timeoutMilliseconds)
    }

    package func post(_ path: String, bearer: String?, body: [String: JSONValue], headers: [String: String] = [:])
        throws
        -> RunnerClient.Answer
    {
        try client.post(path, bearer: bearer, body: body, headers: headers)
    }

    /// Sends a signal and waits for the process to end; returns its exit status.
    package func stop(signal: Int32 = SIGTERM) -> Int32 {
        kill(process.processIdentifier, signal)
        process.waitUntilExit()
        return process.terminationStatus
    }
}

/// Functions written as shell scripts, for the host behaviours no real function shows on demand: sleeping past
/// the timeout, crashing, printing garbage. Each branches on `AWS_LAMBDA_RUNTIME_API` to act as a warm worker.
package struct ScriptFunctions {
    package let directory: URL
    package let table: URL

    /// One script function: its shell body and its row of the function table.
    package struct Spec {
        package var body: String
        package var timeoutSeconds = 2
        package var memoryMB = 128
        package var concurrency = 2
        /// The table's `maxBodyBytes` (absent: the 16 KiB default).
        package var maxBodyBytes: Int?

        package init(
            body: String, timeoutSeconds: Int = 2, memoryMB: Int = 128, concurrency: Int = 2, maxBodyBytes: Int? = nil
        ) {
            self.body = body
            self.timeoutSeconds = timeoutSeconds
            self.memoryMB = memoryMB
            self.concurrency = concurrency
            self.maxBodyBytes = maxBodyBytes
        }
    }

    /// Polls for the next event (a warm worker); `|| exit 0` so that a worker whose runner has gone leaves.
    package static let next =
        #"curl -sf -o /dev/null -D "$TMPDIR_SCRIPT/headers" "http://$AWS_LAMBDA_RUNTIME_API/2018-06-01/runtime/invocation/next" || exit 0"#

    package static func make(timeoutSeconds: Int = 2, concurrency: Int = 2) throws -> ScriptFunctions {
        let scripts: [String: String] = [
            "sleepy": """
            if [ -n "$AWS_LAMBDA_RUNTIME_API" ]; then \(next); fi
            echo $$ > "$SCRIPT_PID_DIR/sleepy.pid"
            exec sleep 60
            """,
            "crashy": """
            if [ -n "$AWS_LAMBDA_RUNTIME_API" ]; then \(next); fi
            kill -SEGV $$
            """,
            "garbage": """
            if [ -n "$AWS_LAMBDA_RUNTIME_API" ]; then
              while true; do \(next); reply 'this is not json'; done
            fi
            cat > /dev/null; echo 'this is not json'
            """,
            "bare": """
            if [ -n "$AWS_LAMBDA_RUNTIME_API" ]; then
              while true; do \(next); reply '{"hello":"world"}'; done
            fi
            cat > /dev/null; echo '{"hello":"world"}'
            """,
            "slow": """
            if [ -n "$AWS_LAMBDA_RUNTIME_API" ]; then
              while true; do \(next); sleep 1; reply '{"statusCode":200,"body":"slow"}'; done
            fi
            cat > /dev/null; sleep 1; echo '{"statusCode":200,"body":"slow"}'
            """,
        ]
        return try make(
            scripts.mapValues {
                Spec(body: $0, timeoutSeconds: timeoutSeconds, concurrency: $0.contains("sleep 1") ? 1 : concurrency)
            })
    }

    /// Script functions of one's own. Each script has `next` (see above) and `reply JSON` (post a response for the
    /// event `next` fetched) at hand, and `$TMPDIR_SCRIPT`.
    package static func make(_ specs: [String: Spec]) throws -> ScriptFunctions {
        // Shell-script workers poll with curl; install-deps.sh installs it.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "script-functions-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let respond = """
            id=$(grep -i '^lambda-runtime-aws-request-id:' "$TMPDIR_SCRIPT/headers" | cut -d' ' -f2 | tr -d '\\r')
            curl -s -o /dev/null -X POST --data-binary "$1" "http://$AWS_LAMBDA_RUNTIME_API/2018-06-01/runtime/invocation/$id/response"
            """
        var functions: [JSONValue] = []
        for (name, spec) in specs {
            let file = directory.appendingPathComponent(name)
            let text = "#!/bin/sh\nTMPDIR_SCRIPT=$(mktemp -d)\nreply() {\n\(respond)\n}\n\(spec.body)\n"
            try text.write(to: file, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: file.path)
            var row: [String: JSONValue] = [
                "name": .string(name), "method": .string("POST"), "path": .string("/test/\(name)"),
                "timeoutSeconds": .number(Double(spec.timeoutSeconds)), "memoryMB": .number(Double(spec.memoryMB)),
                "concurrency": .number(Double(spec.concurrency)),
            ]
            if let limit = spec.maxBodyBytes { row["maxBodyBytes"] = .number(Double(limit)) }
            functions.append(.object(row))
        }
        let table = directory.appendingPathComponent("functions.json")
        try json(["functions": .array(functions)]).write(to: table, atomically: true, encoding: .utf8)
        return ScriptFunctions(directory: directory, table: table)
    }

    package var arguments: [String] { ["--functions", table.path, "--bin-dir", directory.path] }
}

/// Bytes appended from one thread and read from another.
package final class LockedData: Sendable {
    private let storage = Mutex(Data())
    package init() {}
    package func append(_ data: Data) { storage.withLock { $0.append(data) } }
    package var value: Data { storage.withLock { $0 } }

    /// Appends what `handle` yields until its end, read on a thread of its own (a blocked read on
    /// DispatchQueue.global() waits for libdispatch to grow its pool, and with the suites' many readers that can take
    /// longer than a test); `group`, when given, is left at the end.
    package func drain(_ handle: FileHandle, group: DispatchGroup? = nil) {
        group?.enter()
        Thread {
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                self.append(chunk)
            }
            group?.leave()
        }.start()
    }
}

/// HTTP to a runner, usable from many threads at once.
package struct RunnerClient: Sendable {
    package let port: Int

    package struct Answer {
        package let status: Int
        package let headers: [String: String]
        package let body: [UInt8]
        package var json: JSONValue? { try? JSONValue.parse(body) }
    }

    /// One HTTP request to the runner.
    package func request(
        _ method: String, _ path: String, headers: [String: String] = [:], body: String? = nil,
        timeoutMilliseconds: Int = 30_000
    ) throws -> Answer {
        let request = CurlRequest(
            method: method, url: "http://127.0.0.1:\(port)\(path)", headers: headers.map { ($0.key, $0.value) },
            body: Array((body ?? "").utf8))
        switch CurlClient.perform(request, timeoutMilliseconds: timeoutMilliseconds) {
        case .success(let response):
            // The emulator's inspection routes show what Google received, tokens included; they are not answers of
            // ours.
            if !path.hasPrefix("/_emulator/") { LeakCapture.record(response.body, source: "runner answer \(path)") }
            return Answer(status: response.status, headers: response.headers, body: response.body)
        case .failure(let error): throw RunnerServer.ServerError.noAnswer(error.description)
        }
    }

    /// A JSON POST with a bearer token.
    package func post(_ path: String, bearer: String?, body: [String: JSONValue], headers: [String: String] = [:])
        throws
        -> Answer
    {
        var all = headers
        all["content-type"] = "application/json"
        if let bearer { all["authorization"] = "Bearer \(bearer)" }
        return try request("POST", path, headers: all, body: json(body))
    }

}

/// The `port` of the `{"event":"listening","port":N,…}` line a runner command prints once bound; `nil` when the
/// process ended without printing it.
package func announcedPort(_ stdout: Pipe) -> Int? {
    announcedLine(stdout)?["port"]?.integerValue.map(Int.init)
}

/// The first line a server prints on stdout, parsed: `{"event":"listening","port":N,…}`.
package func announcedLine(_ stdout: Pipe) -> JSONValue? {
    var announced = Data()
    while !announced.contains(UInt8(ascii: "\n")) {
        let chunk = stdout.fileHandleForReading.availableData
        if chunk.isEmpty { break }
        announced.append(chunk)
    }
    return try? JSONValue.parse(Array(announced.prefix { $0 != UInt8(ascii: "\n") }))
}

/// A function table holding `dose-record` alone (concurrency 1), written to a temporary file for `--functions`.
package func doseRecordOnlyTable(timeoutSeconds: Int) throws -> URL {
    let table = FileManager.default.temporaryDirectory.appendingPathComponent("table-\(UUID().uuidString).json")
    try
        #"{"functions":[{"name":"dose-record","method":"POST","path":"/api/dose-records","timeoutSeconds":\#(timeoutSeconds),"memoryMB":128,"concurrency":1}]}"#
        .write(to: table, atomically: true, encoding: .utf8)
    return table
}

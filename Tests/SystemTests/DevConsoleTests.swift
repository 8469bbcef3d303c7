import Codecs
import Curl
import Foundation
import Libpq
import ProcessSupervision
import Synchronization
import Testing
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// `runner dev` in a checkout of its own: a temporary directory linking the repository's `scripts`, `infra` and
/// `Tests`, so that its `.data/` (cluster, secret, key) is the test's and never the developer's.
final class DevStack {
    let directory: URL
    let port: Int
    let databasePort: Int
    let banner: String
    private let process: Process
    private let stderrBuffer = LockedData()

    init(extraArguments: [String] = []) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("dev-stack-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for name in ["scripts", "infra", "Tests"] {
            try FileManager.default.createSymbolicLink(
                at: directory.appendingPathComponent(name),
                withDestinationURL: TestDatabase.repositoryRoot.appendingPathComponent(name))
        }
        let (probe, freePort) = try RunnerNewcomerTests.holdPort()
        probe.terminate()
        probe.waitUntilExit()
        databasePort = freePort
        let process = Process()
        process.executableURL = Executables.binDirectory.appendingPathComponent("runner")
        process.arguments =
            [
                "dev", "--port", "0", "--database-port", "\(databasePort)", "--bin-dir",
                Executables.binDirectory.path,
            ] + extraArguments
        process.currentDirectoryURL = directory
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = FileHandle.nullDevice
        try process.run()
        self.process = process
        stderrBuffer.drain(stderr.fileHandleForReading)
        // The banner ends with the stdin invocation's line; read on a thread of its own, waited for with a deadline.
        let printed = LockedData()
        printed.drain(stdout.fileHandleForReading)
        func complete(_ text: String) -> Bool {
            guard let start = text.range(of: "\nsed -e ") else { return false }
            return text[start.upperBound...].contains("\n")
        }
        let deadline = Date().addingTimeInterval(180)
        var text = ""
        repeat {
            Thread.sleep(forTimeInterval: 0.05)
            text = String(decoding: printed.value, as: UTF8.self)
        } while !complete(text) && process.isRunning && Date() < deadline
        banner = text
        guard let match = text.firstMatch(of: /dev stack on http:\/\/127\.0\.0\.1:(\d+)/), let port = Int(match.1)
        else {
            process.terminate()
            process.waitUntilExit()
            throw RunnerServer.ServerError.didNotStart(text + String(decoding: stderrBuffer.value, as: UTF8.self))
        }
        self.port = port
    }

    deinit {
        LeakCapture.record(stderrBuffer.value, source: "runner dev stderr")
        if process.isRunning {
            kill(process.processIdentifier, SIGINT)
            for _ in 0..<200 where process.isRunning { Thread.sleep(forTimeInterval: 0.05) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        _ = try? ChildProcess.run(
            executable: TestDatabase.repositoryRoot.appendingPathComponent("scripts/pg.sh"),
            arguments: ["stop", directory.appendingPathComponent(".data/postgres").path], input: Data())
        try? FileManager.default.removeItem(at: directory)
    }

    var stderr: String { String(decoding: stderrBuffer.value, as: UTF8.self) }
    /// `runner dev`'s cluster asks for the password it keeps in `.data/postgres.password`.
    var databaseURL: String {
        let password =
            (try? String(contentsOf: directory.appendingPathComponent(".data/postgres.password"), encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        return "postgresql://postgres:\(password)@127.0.0.1:\(databasePort)/caregiver_push"
    }
    var base: String { "http://127.0.0.1:\(port)" }

    /// One request, not recorded for the leak scan: the console's demo document carries the demo's tokens (the
    /// ones the banner prints) by design.
    func request(
        _ method: String, _ path: String, headers: [(name: String, value: String)] = [], body: String = ""
    ) throws -> CurlResponse {
        let request = CurlRequest(method: method, url: base + path, headers: headers, body: Array(body.utf8))
        switch CurlClient.perform(request, timeoutMilliseconds: 30_000) {
        case .success(let response): return response
        case .failure(let error): throw RunnerServer.ServerError.noAnswer(error.description)
        }
    }

    /// Polls the console's state until `condition` holds (or 30 s pass); the last state either way.
    func state(until condition: (JSONValue) -> Bool) throws -> JSONValue {
        let deadline = Date().addingTimeInterval(30)
        var last = JSONValue.null
        while Date() < deadline {
            last = try JSONValue.parse(try request("GET", "/_dev/api/state").body)
            if condition(last) { return last }
            Thread.sleep(forTimeInterval: 0.2)
        }
        return last
    }
}

@Suite("runner dev's console")
struct DevConsoleTests {
    static let chromium = "/usr/bin/chromium"

    /// Headless Chromium on `url`: its flags for a root user (no sandbox) and a page that settles by itself.
    static func chromium(_ arguments: [String], url: String) throws -> (Int32, String) {
        var all = [
            "--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check", "--hide-scrollbars",
            "--virtual-time-budget=4000", "--user-data-dir=" + NSTemporaryDirectory() + "console-chromium-\(UUID())",
        ]
        if getuid() == 0 { all.append("--no-sandbox") }
        let result = try ChildProcess.run(
            executable: URL(fileURLWithPath: chromium), arguments: all + arguments + [url], input: Data())
        return (result.exitStatus, String(decoding: result.standardOutput, as: UTF8.self))
    }

    static func dose(_ stack: DevStack, demo: JSONValue, slot: String, at time: String) throws -> CurlResponse {
        let medication = demo["medications"]?[slot]?.stringValue ?? ""
        let today = demo["today"]?.stringValue ?? ""
        return try stack.request(
            "POST", "/api/dose-records",
            headers: [
                ("content-type", "application/json"),
                ("authorization", "Bearer \(demo["patientToken"]?.stringValue ?? "")"),
            ],
            body: #"{"medicationId":"\#(medication)","scheduledAt":"\#(today)T\#(time):00+09:00"}"#)
    }

    @Test(
        "a dose through the API: the console shows the phone's card in Japanese, the delivery SENT and the cold invocation; in Chromium too, with an HTML-bearing name shown as text"
    )
    func doseShowsOnTheConsole() throws {
        let stack = try DevStack()
        #expect(stack.banner.contains("Console: \(stack.base)/_dev"))
        let page = try stack.request("GET", "/_dev")
        #expect(page.status == 200)
        #expect(page.headers["content-type"]?.hasPrefix("text/html") == true)
        #expect(page.headers["content-security-policy"]?.contains("default-src 'none'") == true)
        #expect(String(decoding: page.body, as: UTF8.self).contains("<script src=\"/_dev/console.js\""))
        // The demo's tokens only to the console's own script.
        #expect(try stack.request("GET", "/_dev/api/demo").status == 403)
        let demoAnswer = try stack.request("GET", "/_dev/api/demo", headers: [("x-dev-console", "1")])
        #expect(demoAnswer.status == 200)
        let demo = try JSONValue.parse(demoAnswer.body)

        let dose = try Self.dose(stack, demo: demo, slot: "morning", at: "08:00")
        #expect(dose.status == 200, "\(String(decoding: dose.body, as: UTF8.self))")
        let state = try stack.state { state in
            state["deliveries"]?.arrayValue?.first?["status"]?.stringValue == "SENT"
                && state["notifications"]?.arrayValue?.isEmpty == false
        }
        let card = try #require(state["notifications"]?.arrayValue?.first)
        #expect(card["title"]?.stringValue == "服薬記録")
        #expect(card["body"]?.stringValue?.wholeMatch(of: /山田花子さんが(時間内に)?薬を服用しました！?/) != nil)
        #expect(card["patientName"]?.stringValue == "山田花子")
        #expect(card["slot"]?.stringValue == "morning" && card["date"] == demo["today"])
        #expect(card["collapseId"]?.stringValue?.count == 32)
        #expect(card["deepLink"]?.stringValue == "History · \(demo["today"]?.stringValue ?? "") · morning")
        let delivery = try #require(state["deliveries"]?.arrayValue?.first)
        #expect(delivery["status"]?.stringValue == "SENT" && delivery["attempts"]?.numberValue == 1)
        let invocation = state["invocations"]?.arrayValue?.first { $0["function"]?.stringValue == "dose-record" }
        #expect(invocation?["status"]?.stringValue == "200" && invocation?["mode"]?.stringValue == "cold")
        #expect(invocation?["requestId"]?.stringValue?.isEmpty == false)
        #expect(invocation?["durationMs"]?.numberValue != nil)
        let phone = state["devices"]?.arrayValue?.first { $0["device"]?.stringValue == "demo-device-token-ca…" }
        #expect(phone?["enabled"]?.boolValue == true && phone?["environment"]?.stringValue == "DEV")

        // A patient whose name is markup: the next push carries it; the page must show it as characters.
        // (display_name holds at most 50 characters.)
        let hostile = "<img data-xss src=x><script>alert(1)</script>"
        let connection = try PostgresConnection(url: stack.databaseURL)
        defer { connection.close() }
        try connection.query(
            "UPDATE patients SET display_name = \(hostile) WHERE id = \(DevConsoleTests.demoPatient)")
        #expect(try Self.dose(stack, demo: demo, slot: "noon", at: "12:00").status == 200)
        let both = try stack.state { $0["notifications"]?.arrayValue?.count == 2 }
        #expect(both["notifications"]?.arrayValue?.first?["patientName"]?.stringValue == hostile)

        // The real browser: the page's own script renders the state.
        let (status, dom) = try Self.chromium(["--dump-dom"], url: stack.base + "/_dev")
        #expect(status == 0)
        #expect(dom.contains("<title>caregiver-push · dev console</title>"))
        #expect(dom.contains("服薬記録"))
        #expect(dom.contains("山田花子さんが"))
        #expect(dom.contains(#"<span class="state SENT">SENT</span>"#), "\(dom)")
        #expect(dom.contains("dose-record"))
        #expect(dom.contains("&lt;img data-xss src=x&gt;&lt;script&gt;alert(1)&lt;/script&gt;"))
        #expect(!dom.contains("<img data-xss"))
        #expect(!dom.contains("<script>alert"))
        // For a person to look at (docs/images/dev-console.png is a copy).
        let screenshot = TestDatabase.repositoryRoot.appendingPathComponent(".build/dev-console.png")
        try? FileManager.default.removeItem(at: screenshot)
        let (shot, _) = try Self.chromium(
            ["--screenshot=\(screenshot.path)", "--window-size=1400,1100"], url: stack.base + "/_dev")
        #expect(shot == 0)
        let png = try Data(contentsOf: screenshot)
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]) && png.count > 20_000)
    }

    static let demoPatient = UUID(uuidString: "22222222-2222-4222-8222-222222222222")!

    @Test("the console answers requests for a loopback host only (a DNS-rebinding page names its own)")
    func loopbackHostOnly() throws {
        let stack = try DevStack()
        for host in ["127.0.0.1:\(stack.port)", "localhost:\(stack.port)"] {
            #expect(try stack.request("GET", "/_dev", headers: [("host", host)]).status == 200, "\(host)")
        }
        for host in ["evil.example:\(stack.port)", "127.0.0.1.evil.example", "localhost.evil.example:\(stack.port)"] {
            #expect(try stack.request("GET", "/_dev/api/state", headers: [("host", host)]).status == 403, "\(host)")
        }
    }

    @Test("runner serve (gateway serve, which the image runs, plus --fcm-emulator) has no console")
    func serveHasNone() throws {
        _ = TestDatabase.migrated
        let server = try RunnerServer(arguments: ["--mode", "cold", "--fcm-emulator"], environment: testEnvironment())
        for path in ["/_dev", "/_dev/api/state", "/_dev/api/demo", "/_dev/console.js"] {
            #expect(try server.request("GET", path, headers: ["x-dev-console": "1"]).status == 404, "\(path)")
        }
    }

    @Test("a failing step of runner dev prints its own error and what to do, not the usage")
    func stepFailure() throws {
        // PostgreSQL cannot listen where another process already does.
        let (holder, busy) = try RunnerNewcomerTests.holdPort()
        defer {
            holder.terminate()
            holder.waitUntilExit()
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dev-step-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for name in ["scripts", "infra", "Tests"] {
            try FileManager.default.createSymbolicLink(
                at: directory.appendingPathComponent(name),
                withDestinationURL: TestDatabase.repositoryRoot.appendingPathComponent(name))
        }
        defer {
            _ = try? ChildProcess.run(
                executable: TestDatabase.repositoryRoot.appendingPathComponent("scripts/pg.sh"),
                arguments: ["stop", directory.appendingPathComponent(".data/postgres").path], input: Data())
            try? FileManager.default.removeItem(at: directory)
        }
        let process = Process()
        process.executableURL = Executables.binDirectory.appendingPathComponent("runner")
        process.arguments = [
            "dev", "--port", "0", "--database-port", "\(busy)", "--bin-dir", Executables.binDirectory.path,
        ]
        process.currentDirectoryURL = directory
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 1)
        #expect(text.contains("runner dev: starting PostgreSQL"), "\(text)")
        #expect(text.contains("What to do:") && text.contains("DEV_PG_PORT="))
        #expect(!text.contains("Usage:"))
    }
}

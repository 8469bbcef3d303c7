import Codecs
import FCMEmulator
import Foundation

/// The FCM emulator in a process of its own: this benchmark executable started again as `bench --fcm-stand-in
/// DELAY_MS` (``serve(arguments:)``), the same ``InProcessEmulator`` inside, answering the parent's questions one line
/// at a time on its stdin and stdout. Its TLS, HTTP/2 and timers then run on their own threads of their own process,
/// not among the sender's, and its CPU is its own (`getrusage` in the child, read over the pipe): a fan-out's
/// dispatcher CPU and wall time say something about the sender, and the stand-in's cost is reported beside them.
final class EmulatorProcess: FCMStandIn {
    let port: Int
    let serviceAccountJSON: String
    let caFile: String?
    private let process: Process
    private let commands: FileHandle
    private let answers: FileHandle

    /// The subcommand's flag: `bench --fcm-stand-in DELAY_MS [--plain] [--fail-first-every N] [--retry-after S]`.
    static let flag = "--fcm-stand-in"

    /// Starts the child and waits (at most 30 s) for its first line: where it listens and how to reach it.
    /// - Parameters:
    ///   - tls: TLS with ALPN h2 on its own port (as fcm.googleapis.com); `false`: plain HTTP/1.1, for a front such
    ///     as nghttpx to terminate TLS.
    ///   - failFirstEvery: answer 503 to every N-th message's first attempt (0: never), with `Retry-After:
    ///     retryAfterSeconds` when given.
    init(delayMilliseconds: Int, tls: Bool = true, failFirstEvery: Int = 0, retryAfterSeconds: Int? = nil) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var arguments = [Self.flag, String(delayMilliseconds)]
        if !tls { arguments.append("--plain") }
        if failFirstEvery > 0 { arguments += ["--fail-first-every", String(failFirstEvery)] }
        if let retryAfterSeconds { arguments += ["--retry-after", String(retryAfterSeconds)] }
        process.arguments = arguments
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        self.process = process
        commands = input.fileHandleForWriting
        answers = output.fileHandleForReading
        guard let first = Self.readLine(answers), let hello = try? JSONValue.parse(Array(first.utf8)),
            let port = hello["port"]?.integerValue, let account = hello["serviceAccountJSON"]?.stringValue
        else {
            process.terminate()
            throw BenchmarkError("the FCM stand-in process did not start")
        }
        self.port = Int(port)
        serviceAccountJSON = account
        caFile = hello["caFile"]?.stringValue
    }

    deinit {
        try? commands.close()
        process.waitUntilExit()
    }

    func requestCount() -> Int { Int(ask("requests")["requests"]?.integerValue ?? 0) }

    func connectionUsage(since index: Int) -> (connections: Int, maxConcurrentStreams: Int, allHTTP2: Bool) {
        let answer = ask("usage \(index)")
        return (
            Int(answer["connections"]?.integerValue ?? 0), Int(answer["maxStreams"]?.integerValue ?? 0),
            answer["allHTTP2"] == .bool(true)
        )
    }

    func resetStreamCount() { _ = ask("reset") }

    func counts() -> (delivered: Int, mints: Int) {
        let answer = ask("counts")
        return (Int(answer["delivered"]?.integerValue ?? 0), Int(answer["mints"]?.integerValue ?? 0))
    }

    func processCPUMilliseconds() -> Double? { ask("cpu")["cpuMs"]?.numberValue }

    /// Answers 503 to every `every`-th message's first attempt from now on (0: none), with `Retry-After` when given.
    func failFirstAttempts(every: Int, retryAfterSeconds: Int?) { _ = ask("fail \(every) \(retryAfterSeconds ?? 0)") }

    /// Forgets every request received (and the attempts counted per device and per message).
    func forgetRequests() { _ = ask("forget") }

    /// Every `messages:send` received since the last ``forgetRequests()``, written by the child to `path` (one line
    /// each, see ``serve(arguments:)``) and read back.
    func sends(path: String) throws -> [StandInSend] {
        _ = ask("sends \(path)")
        defer { unlink(path) }
        return try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").compactMap(StandInSend.init)
    }

    /// One command line, one JSON line back.
    private func ask(_ command: String) -> JSONValue {
        commands.write(Data((command + "\n").utf8))
        guard let line = Self.readLine(answers), let answer = try? JSONValue.parse(Array(line.utf8)) else {
            return .null
        }
        return answer
    }

    /// Reads up to a newline, a byte at a time (the answers are short, and nothing may be read past the line).
    private static func readLine(_ handle: FileHandle) -> String? {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while read(handle.fileDescriptor, &byte, 1) == 1 {
            if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
        return nil
    }

    /// The child's side: the emulator over TLS + h2 answering after `DELAY_MS`, then a loop over its stdin.
    static func serve(arguments: [String]) -> Never {
        func option(_ name: String) -> Int? {
            arguments.firstIndex(of: name).flatMap { arguments.indices.contains($0 + 1) ? Int(arguments[$0 + 1]) : nil }
        }
        guard let delay = arguments.first.flatMap({ Int($0) }),
            let emulator = try? InProcessEmulator.start(
                delayMilliseconds: delay, tls: !arguments.contains("--plain"))
        else {
            FileHandle.standardError.write(Data("bench \(flag): cannot start the emulator\n".utf8))
            exit(1)
        }
        var hello: [String: JSONValue] = [
            "port": .number(Double(emulator.port)), "serviceAccountJSON": .string(emulator.serviceAccountJSON),
        ]
        if let caFile = emulator.caFile { hello["caFile"] = .string(caFile) }
        func answer(_ fields: [String: JSONValue]) {
            FileHandle.standardOutput.write(Data((JSONValue.object(fields).compactText + "\n").utf8))
        }
        if let every = option("--fail-first-every") {
            let retryAfter = option("--retry-after")
            emulator.read { await $0.failFirstAttempts(every: every, retryAfterSeconds: retryAfter) }
        }
        answer(hello)
        while let line = Swift.readLine() {
            let words = line.split(separator: " ")
            switch words.first {
            case "requests":
                answer(["requests": .number(Double(emulator.requestCount()))])
            case "usage":
                let usage = emulator.connectionUsage(since: words.dropFirst().first.flatMap { Int($0) } ?? 0)
                answer([
                    "connections": .number(Double(usage.connections)),
                    "maxStreams": .number(Double(usage.maxConcurrentStreams)), "allHTTP2": .bool(usage.allHTTP2),
                ])
            case "reset":
                emulator.resetStreamCount()
                answer([:])
            case "counts":
                let counts = emulator.counts()
                answer(["delivered": .number(Double(counts.delivered)), "mints": .number(Double(counts.mints))])
            case "fail":
                let values = words.dropFirst().compactMap { Int($0) }
                let every = values.first ?? 0
                let retryAfter = values.count > 1 && values[1] > 0 ? values[1] : nil
                emulator.read { await $0.failFirstAttempts(every: every, retryAfterSeconds: retryAfter) }
                answer([:])
            case "forget":
                emulator.read { await $0.reset() }
                answer([:])
            case "sends":
                let lines = emulator.read { state in await state.received.map(StandInSend.line) }
                let path = words.dropFirst().joined(separator: " ")
                let written =
                    (try? (lines.joined(separator: "\n") + "\n").write(
                        toFile: path, atomically: true, encoding: .utf8)) != nil
                answer(["count": .number(Double(lines.count)), "written": .bool(written)])
            case "cpu":
                var usage = rusage()
                getrusage(RUSAGE_SELF.rawValue, &usage)
                let milliseconds =
                    Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000
                    + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1000
                answer(["cpuMs": .number(milliseconds)])
            default:
                answer(["error": .string("unknown command")])
            }
        }
        exit(0)
    }
}

extension JSONValue {
    /// One line of JSON.
    fileprivate var compactText: String { JSONCoding.string(self, fallback: "null") }
}

/// One `messages:send` the stand-in received: when it answered (wall clock, microseconds since the epoch: the moment
/// it recorded the request, just before its answer left), what, and about which event of which device. The token
/// is kept only to match deliveries to recipients; nothing of it is printed.
struct StandInSend {
    let answeredWallMicroseconds: Int64
    let status: Int
    let token: String
    let collapseID: String
    let patientID: String
    let date: String
    let slot: String
    let recordingGroupID: String

    /// The line the child writes: tab-separated fields in the order above.
    static func line(_ received: FCMEmulatorState.Received) -> String {
        let data = received.message["data"]
        return [
            String(Int64(received.receivedAt.timeIntervalSince1970 * 1_000_000)), String(received.status),
            received.deviceToken, received.message["apns"]?["headers"]?["apns-collapse-id"]?.stringValue ?? "",
            data?["patientId"]?.stringValue ?? "", data?["date"]?.stringValue ?? "", data?["slot"]?.stringValue ?? "",
            data?["recordingGroupId"]?.stringValue ?? "",
        ].joined(separator: "\t")
    }

    init?(_ line: Substring) {
        let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        guard fields.count == 8, let wall = Int64(fields[0]), let status = Int(fields[1]) else { return nil }
        (answeredWallMicroseconds, self.status, token, collapseID) = (wall, status, fields[2], fields[3])
        (patientID, date, slot, recordingGroupID) = (fields[4], fields[5], fields[6], fields[7])
    }
}

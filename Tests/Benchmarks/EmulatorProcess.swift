import Codecs
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

    /// The subcommand's flag: `bench --fcm-stand-in DELAY_MS`.
    static let flag = "--fcm-stand-in"

    /// Starts the child and waits (at most 30 s) for its first line: where it listens and how to reach it.
    init(delayMilliseconds: Int) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        process.arguments = [Self.flag, String(delayMilliseconds)]
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
        guard let delay = arguments.first.flatMap({ Int($0) }),
            let emulator = try? InProcessEmulator.start(delayMilliseconds: delay)
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

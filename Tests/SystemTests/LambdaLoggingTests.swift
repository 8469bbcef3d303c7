import Codecs
@testable import FunctionRuntime
import Foundation
import Logging
import Testing
import TestSupport

/// Lambda's advanced logging controls: `AWS_LAMBDA_LOG_LEVEL` and `AWS_LAMBDA_LOG_FORMAT`, as Lambda sets them in a
/// custom runtime's environment from the function's `LoggingConfig`, honoured by the built functions.
@Suite("Lambda's logging controls")
struct LambdaLoggingTests {
    @Test("AWS_LAMBDA_LOG_LEVEL wins over LOG_LEVEL; without it LOG_LEVEL, then info")
    func levelPrecedence() {
        #expect(LogFormat.from(environment: ["AWS_LAMBDA_LOG_LEVEL": "WARN", "LOG_LEVEL": "debug"]).level == .warning)
        #expect(LogFormat.from(environment: ["AWS_LAMBDA_LOG_LEVEL": "FATAL"]).level == .critical)
        #expect(LogFormat.from(environment: ["LOG_LEVEL": "debug"]).level == .debug)
        #expect(LogFormat.from(environment: [:]) == (.info, .json))
        #expect(LogFormat.from(environment: ["AWS_LAMBDA_LOG_FORMAT": "JSON"]).format == .lambdaJSON)
        #expect(LogFormat.from(environment: ["AWS_LAMBDA_LOG_FORMAT": "Text"]).format == .text)
    }

    /// A function whose every invocation logs one error ("function is misconfigured": no DATABASE_URL).
    static func misconfiguredRun(_ environment: [String: String]) throws -> [String] {
        let event = try Executables.fixture(
            "push-register/valid.json",
            ["CAREGIVER_TOKEN": "x.y.z", "DEVICE_TOKEN": makeDeviceToken(), "INSTALLATION_ID": "logging"])
        let run = try Executables.run("push-register", input: event, environment: environment)
        #expect(run.response?.statusCode == 500)
        return run.stderr.split(separator: "\n").map(String.init).filter { !EMF.isEMF(Substring($0)) }
    }

    @Test("JSON format: Lambda's keys and level names, and AWS_LAMBDA_LOG_LEVEL filters in the function")
    func lambdaJSON() throws {
        let errors = try Self.misconfiguredRun([
            "AWS_LAMBDA_LOG_FORMAT": "JSON", "AWS_LAMBDA_LOG_LEVEL": "ERROR", "LOG_LEVEL": "debug",
        ])
        #expect(!errors.isEmpty)
        for line in errors {
            let object = try JSONValue.parse(line)
            #expect(object["level"] == .string("error"))
            #expect(object["timestamp"]?.stringValue?.hasSuffix("Z") == true)
            #expect(object["ts"] == nil)
        }
        let fatalOnly = try Self.misconfiguredRun(["AWS_LAMBDA_LOG_FORMAT": "JSON", "AWS_LAMBDA_LOG_LEVEL": "FATAL"])
        #expect(fatalOnly.isEmpty, "an error line passed a FATAL filter: \(fatalOnly)")
    }

    @Test("Text format: timestamp, upper-case level, message, then key=value")
    func lambdaText() throws {
        let lines = try Self.misconfiguredRun(["AWS_LAMBDA_LOG_FORMAT": "Text", "AWS_LAMBDA_LOG_LEVEL": "INFO"])
        let misconfigured = lines.filter { $0.contains(" ERROR function is misconfigured ") }
        #expect(misconfigured.count == 1)
        #expect(misconfigured.first?.contains("config.variable=\"DATABASE_URL\"") == true)
        #expect(lines.allSatisfy { !$0.hasPrefix("{") })
    }

    @Test("a line stays one JSON object whatever its strings hold: each reads back as it was logged")
    func awkwardStrings() throws {
        let texts = ["plain", "q\"uo\\te", "line\nbreak\r\t", "\u{0}\u{1}\u{8}\u{C}\u{1F}", "é日😀\u{2028}", "a/b"]
        for (index, text) in texts.enumerated() {
            let label = texts[(index + 1) % texts.count]
            for lambdaKeys in [false, true] {
                let line = JSONLogHandler.line(
                    level: .info, message: text, metadata: ["field": .string(text), text: .string("key")], label: label,
                    lambdaKeys: lambdaKeys)
                #expect(line.hasSuffix("}\n") && line.dropLast().allSatisfy { $0 != "\n" })
                let object = try JSONValue.parse(String(line.dropLast()))
                #expect(object["msg"] == .string(text))
                #expect(object["field"] == .string(text))
                #expect(object[text] == .string("key"))
                #expect(object["function"] == .string(label))
            }
        }
    }

    @Test("swift-log's warning is Lambda's warn, critical its fatal (a filter at WARN keeps warnings)")
    func levelNames() {
        let line = JSONLogHandler.line(level: .warning, message: "m", metadata: [:], label: "f", lambdaKeys: true)
        #expect(line.contains(#""level":"warn""#))
        let critical = JSONLogHandler.line(level: .critical, message: "m", metadata: [:], label: "f", lambdaKeys: true)
        #expect(critical.contains(#""level":"fatal""#))
        let plain = JSONLogHandler.line(level: .warning, message: "m", metadata: [:], label: "f")
        #expect(plain.contains(#""level":"warning""#) && plain.hasPrefix(#"{"ts":"#))
    }
}

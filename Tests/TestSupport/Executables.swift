import CaregiverPush
import Codecs
import Foundation
import FunctionRuntime
import ProcessSupervision
import Testing

/// The built executables, driven through their real contract: where they are, the fixture events, and one run with
/// the event on stdin (its stdout and stderr captured for the leak scan).
package enum Executables {
    package static let binDirectory: URL = {
        if let dir = ProcessInfo.processInfo.environment["FUNCTIONS_BIN_DIR"] { return URL(fileURLWithPath: dir) }
        return TestDatabase.repositoryRoot.appendingPathComponent(".build/debug")
    }()

    package static let fixtures = TestDatabase.repositoryRoot.appendingPathComponent("Tests/Fixtures")

    package struct Run {
        package let result: ChildProcess.Result
        package init(result: ChildProcess.Result) { self.result = result }
        package var response: APIGatewayV2Response? {
            try? JSONDecoder().decode(APIGatewayV2Response.self, from: result.standardOutput)
        }
        package var body: JSONValue? { response.flatMap { try? JSONValue.parse($0.body) } }
        package var stderr: String { String(decoding: result.standardError, as: UTF8.self) }
    }

    /// Reads a fixture and fills its placeholders (inside a base64 body too).
    package static func fixture(_ name: String, _ values: [String: String]) throws -> Data {
        let raw = try String(contentsOf: fixtures.appendingPathComponent(name), encoding: .utf8)
        func fill(_ text: String) -> String {
            values.reduce(text) { $0.replacingOccurrences(of: "${\($1.key)}", with: $1.value) }
        }
        var event = try JSONDecoder().decode(APIGatewayV2Request.self, from: Data(fill(raw).utf8))
        if event.isBase64Encoded == true, let body = event.body, let decoded = Data(base64Encoded: body) {
            event.body = Data(fill(String(decoding: decoded, as: UTF8.self)).utf8).base64EncodedString()
        }
        return try JSONEncoder().encode(event)
    }

    package static func run(
        _ function: String, arguments: [String] = [], input: Data, environment: [String: String] = testEnvironment()
    ) throws -> Run {
        _ = TestDatabase.migrated
        let executable = binDirectory.appendingPathComponent(function)
        try #require(
            FileManager.default.isExecutableFile(atPath: executable.path),
            "build the functions first (make test does): \(executable.path)")
        let result = try ChildProcess.run(
            executable: executable, arguments: arguments, environment: environment, input: input)
        LeakCapture.record(result.standardOutput, source: "\(function) stdout")
        LeakCapture.record(result.standardError, source: "\(function) stderr")
        return Run(result: result)
    }
}

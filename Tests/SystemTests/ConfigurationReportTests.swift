import Foundation
import Testing
import TestSupport

/// A configuration value the function refuses (out of range, malformed) falls back to its default; the built
/// function says so once at start, so that a mistyped setting is seen (docs/behaviour.md#configuration).
@Suite("refused configuration values are logged")
struct ConfigurationReportTests {
    /// The "configuration value refused" lines of one `push-register` run (an event without a token) with `overrides`
    /// over a valid environment.
    static func refusals(_ overrides: [String: String?]) throws -> [String] {
        let run = try Executables.run(
            "push-register", input: Data("{}".utf8), environment: testEnvironment(overrides))
        #expect(run.response?.statusCode == 401)  // no bearer token: the event itself does not matter here
        return run.stderr.split(separator: "\n").map(String.init).filter { $0.contains("configuration value refused") }
    }

    @Test("each refused value is logged at start, naming the variable and the rule, never the value")
    func refusedValuesAreLogged() throws {
        let lines = try Self.refusals(["PUSH_MAX_DEVICES_PER_CAREGIVER": "4711", "DATABASE_LOCK_TIMEOUT_MS": "soon"])
        #expect(lines.count == 2, "\(lines)")
        #expect(
            lines.contains {
                $0.contains(#""config.variable":"PUSH_MAX_DEVICES_PER_CAREGIVER""#) && $0.contains("must be 1 to 100")
            })
        #expect(lines.contains { $0.contains(#""config.variable":"DATABASE_LOCK_TIMEOUT_MS""#) })
        #expect(lines.allSatisfy { $0.contains(#""level":"warning""#) })
        #expect(lines.allSatisfy { !$0.contains("4711") && !$0.contains("soon") })
    }

    @Test("a valid configuration logs no refusal")
    func validConfigurationLogsNone() throws {
        #expect(try Self.refusals([:]).isEmpty)
    }
}

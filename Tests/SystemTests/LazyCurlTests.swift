import Curl
import Foundation
import Testing
import TestFixtures
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// libcurl is loaded (dlopen, Shared/Platform/C/CCurl) by the first HTTP client of a process, not at exec: a function that
/// sends nothing never maps it. What the dynamic loader opened is read from its own trace (`LD_DEBUG=files`,
/// written to `LD_DEBUG_OUTPUT.<pid>`, not to the function's stderr): each library it opens gets a line
/// `file=NAME [0];  needed by …` when linked at exec, `file=NAME [0];  dynamically loaded by …` when dlopen'ed.
@Suite("libcurl loads on the first HTTP request, not at exec")
struct LazyCurlTests {
    /// Runs a built function with the loader's trace on, returning the run and the trace.
    static func traced(
        _ function: String, input: Data, environment: [String: String] = testEnvironment()
    ) throws -> (run: Executables.Run, trace: String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ld-trace-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var traced = environment
        traced["LD_DEBUG"] = "files"
        traced["LD_DEBUG_OUTPUT"] = directory.appendingPathComponent("ld").path
        let run = try Executables.run(function, input: input, environment: traced)
        let trace = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .map { try String(contentsOf: directory.appendingPathComponent($0), encoding: .utf8) }.joined()
        // The trace is real: it shows the libraries linked at exec (libpq for every function).
        #expect(Self.opened("libpq.so.5", in: trace).contains { $0.contains("needed by") }, "no trace of \(function)")
        return (run, trace)
    }

    /// The trace's lines saying that the loader opened `library`, and for whom.
    static func opened(_ library: String, in trace: String) -> [Substring] {
        trace.split(separator: "\n").filter {
            $0.contains("file=\(library) ") && ($0.contains("needed by") || $0.contains("dynamically loaded by"))
        }
    }

    @Test("push-register never loads libcurl: an empty event (400) and a registration (200)")
    func registerDoesNotLoadCurl() throws {
        let empty = try Self.traced("push-register", input: Data())
        #expect(empty.run.response?.statusCode == 400)
        // Not even looked for: no line of the trace names it.
        #expect(!empty.trace.contains("libcurl"), "\(Self.opened("libcurl.so.4", in: empty.trace))")

        let values = [
            "CAREGIVER_TOKEN": try caregiverToken(UUID()), "DEVICE_TOKEN": makeDeviceToken(),
            "INSTALLATION_ID": "install-\(UUID().uuidString)",
        ]
        let register = try Self.traced(
            "push-register", input: try Executables.fixture("push-register/valid.json", values))
        #expect(register.run.response?.statusCode == 200)
        #expect(!register.trace.contains("libcurl"), "\(Self.opened("libcurl.so.4", in: register.trace))")
    }

    @Test("dose-record with a push loads libcurl when it sends, through dlopen, and the push arrives")
    func recordingWithPushLoadsCurl() throws {
        let fake = try FCMFake()
        let household = try RecordingHousehold.make(devicesPerCaregiver: [1])
        let recorded = try Self.traced(
            "dose-record", input: try Executables.fixture("dose-record/patient.json", household.values()),
            environment: fake.environment())
        #expect(recorded.run.response?.statusCode == 200)
        #expect(try fake.messages(to: household.allTokens).count == 1)
        let lines = Self.opened("libcurl.so.4", in: recorded.trace)
        #expect(!lines.isEmpty && lines.allSatisfy { $0.contains("dynamically loaded by") }, "\(lines)")
    }

    @Test("push-register in the Runtime-API loop never loads libcurl: the loop speaks HTTP over its own socket")
    func runtimeLoopDoesNotLoadCurl() throws {
        _ = TestDatabase.migrated
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ld-loop-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let event = directory.appendingPathComponent("event.json")
        try makeEvent(path: "/api/push/register", bearer: nil, body: "{}").write(to: event)
        let (api, port) = try RuntimeAPIEventTests.startFakeRuntimeAPI(in: directory, events: [event.path])
        defer {
            kill(api.processIdentifier, SIGKILL)
            api.waitUntilExit()
        }
        var environment = testEnvironment()
        environment["LD_DEBUG"] = "files"
        environment["LD_DEBUG_OUTPUT"] = directory.appendingPathComponent("ld").path
        let worker = try RuntimeAPIWorker("push-register", port: port, environment: environment)
        defer { worker.stop() }
        let answers = directory.appendingPathComponent("answers").path
        let nexts = answers + ".next"
        // Its answer posted, and the worker back at `next`: the whole invocation, both requests, is behind it.
        RuntimeAPIEventTests.waitFor {
            ((try? String(contentsOfFile: nexts, encoding: .utf8)) ?? "").split(separator: "\n").count >= 2
        }
        let answer = (try? String(contentsOfFile: answers, encoding: .utf8)) ?? ""
        #expect(answer.contains(#"\"statusCode\":401"#), "\(answer)")
        let trace = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasPrefix("ld.") }
            .map { try String(contentsOf: directory.appendingPathComponent($0), encoding: .utf8) }.joined()
        #expect(Self.opened("libpq.so.5", in: trace).contains { $0.contains("needed by") }, "no trace")
        #expect(!trace.contains("libcurl"), "\(Self.opened("libcurl.so.4", in: trace))")
    }

    @Test("a library that does not load is a transient failure that names it")
    func libraryUnavailableIsTransient() {
        let error = CurlError(
            .libraryUnavailable,
            detail: "cannot load libcurl.so.4: libcurl.so.4: cannot open shared object file: No such file or directory")
        #expect(error.isTransient)
        #expect(error.description.hasPrefix("libraryUnavailable: cannot load libcurl.so.4"))
    }
}

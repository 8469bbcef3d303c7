import Codecs
import FunctionRuntime
import ProcessSupervision
import CaregiverPush
import Foundation
import Testing
import TestFixtures
import TestSupport

/// The built executables, driven through their real contract: a fixture event on stdin, the response on stdout,
/// JSON log lines on stderr, exit status 0 once a response is written.
@Suite("built functions over stdin/stdout")
struct ExecutableTests {
    /// Every stderr line is one JSON object with the fields docs/behaviour.md#logs-metrics names.
    static func expectJSONLogLines(
        _ run: Executables.Run, function: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let lines = run.stderr.split(separator: "\n").filter { !EMF.isEMF($0) }
        #expect(!lines.isEmpty, sourceLocation: sourceLocation)
        // And one metrics line per invocation, for this function.
        let metrics = EMF.lines(in: run.stderr, sourceLocation: sourceLocation)
        #expect(metrics.count == 1 && metrics.first?.function == function, sourceLocation: sourceLocation)
        #expect(metrics.first?.values["ColdStart"] == 1, sourceLocation: sourceLocation)
        for line in lines {
            let object = try? JSONValue.parse(String(line))
            #expect(
                object?["level"]?.stringValue != nil, "not a JSON log line: \(line)", sourceLocation: sourceLocation)
            #expect(object?["msg"]?.stringValue != nil, sourceLocation: sourceLocation)
            #expect(object?["function"] == .string(function), sourceLocation: sourceLocation)
        }
    }

    @Test("push-register: the valid fixture registers the device, exits 0, logs JSON lines without secrets")
    func registerFixture() throws {
        let caregiver = UUID()
        let values = [
            "CAREGIVER_TOKEN": try caregiverToken(caregiver), "DEVICE_TOKEN": makeDeviceToken(),
            "INSTALLATION_ID": "install-\(UUID().uuidString)",
        ]
        for name in ["push-register/valid.json", "push-register/valid-base64.json"] {
            let token = makeDeviceToken()
            var filled = values
            filled["DEVICE_TOKEN"] = token
            let run = try Executables.run("push-register", input: try Executables.fixture(name, filled))
            #expect(run.result.exitStatus == 0)
            #expect(run.response?.statusCode == 200)
            #expect(run.response?.headers["content-type"] == "application/json")
            #expect(run.response?.isBase64Encoded == false)
            #expect(run.body == .object(["ok": .bool(true)]))
            #expect(run.response?.headers["x-request-id"]?.hasPrefix("fixture-") == true)
            let devices = try TestDatabase.with { try Seed.devices($0, token: token) }
            #expect(devices.count == 1 && devices.first?.ownerID == caregiver && devices.first?.isEnabled == true)
            Self.expectJSONLogLines(run, function: "push-register")
            for secret in [filled["CAREGIVER_TOKEN"]!, token, testJWTSecret] {
                #expect(!run.stderr.contains(secret))
            }
        }
    }

    @Test(
        "push-register: each bad fixture gives its problem response and writes nothing",
        arguments: [
            ("push-register/no-auth.json", 401, "/problems/unauthorized"),
            ("push-register/patient-token.json", 403, "/problems/forbidden"),
            ("push-register/missing-token.json", 422, "/problems/validation"),
            ("push-register/invalid-platform.json", 422, "/problems/validation"),
            ("push-register/missing-environment.json", 422, "/problems/validation"),
            ("push-register/malformed-json.json", 400, "/problems/bad-request"),
            ("push-register/not-an-object.json", 400, "/problems/bad-request"),
            ("push-register/wrong-content-type.json", 415, "/problems/unsupported-media-type"),
            ("push-register/wrong-method.json", 405, "/problems/method-not-allowed"),
            ("push-unregister/no-auth.json", 401, "/problems/unauthorized"),
            ("push-unregister/missing-token.json", 422, "/problems/validation"),
        ]
    )
    func badFixtures(name: String, status: Int, type: String) throws {
        let patientToken = try TestDatabase.with { try Seed.session($0, patient: try Seed.patient($0)) }
        let token = makeDeviceToken()
        let values = [
            "CAREGIVER_TOKEN": try caregiverToken(UUID()), "DEVICE_TOKEN": token, "PATIENT_TOKEN": patientToken,
            "INSTALLATION_ID": "i",
        ]
        let function = String(name.split(separator: "/")[0])
        let run = try Executables.run(function, input: try Executables.fixture(name, values))
        #expect(run.result.exitStatus == 0)
        #expect(run.response?.statusCode == status)
        #expect(run.response?.headers["content-type"] == "application/problem+json")
        #expect(run.body?["type"] == .string(type))
        #expect(run.body?["status"] == .number(Double(status)))
        if status == 401 { #expect(run.response?.headers["www-authenticate"] == "Bearer") }
        if status == 422 { #expect(run.body?["errors"]?.arrayValue?.isEmpty == false) }
        #expect(try TestDatabase.with { try Seed.devices($0, token: token) }.isEmpty)
        Self.expectJSONLogLines(run, function: function)
    }

    @Test("push-unregister: the valid fixture soft-disables the caller's device")
    func unregisterFixture() throws {
        let caregiver = UUID()
        let token = makeDeviceToken()
        let values = ["CAREGIVER_TOKEN": try caregiverToken(caregiver), "DEVICE_TOKEN": token, "INSTALLATION_ID": "i"]
        #expect(
            try Executables.run("push-register", input: try Executables.fixture("push-register/valid.json", values))
                .response?
                .statusCode == 200)
        let run = try Executables.run(
            "push-unregister", input: try Executables.fixture("push-unregister/valid.json", values))
        #expect(run.result.exitStatus == 0)
        #expect(run.response?.statusCode == 200)
        let devices = try TestDatabase.with { try Seed.devices($0, token: token) }
        #expect(
            devices.count == 1 && devices.first?.isEnabled == false && devices.first?.disabledReason == "USER_DISABLED")
    }

    @Test("garbage on stdin still gets a 400 problem response and exit 0")
    func garbageInput() throws {
        for input in [Data(), Data("not json".utf8), Data([0xFF, 0xFE, 0x00])] {
            let run = try Executables.run("push-register", input: input)
            #expect(run.result.exitStatus == 0)
            #expect(run.response?.statusCode == 400)
            #expect(run.response?.headers["content-type"] == "application/problem+json")
        }
    }

    @Test("an event over the stdin limit (Lambda's 6 MB) gets a 413 problem without being parsed")
    func oversizedEvent() throws {
        let run = try Executables.run(
            "push-register", input: Data(repeating: UInt8(ascii: " "), count: 6 * 1024 * 1024 + 1))
        #expect(run.result.exitStatus == 0)
        #expect(run.response?.statusCode == 413)
    }

    @Test("a missing DATABASE_URL is a 500 problem on stdout and a log line naming it on stderr")
    func missingDatabaseURL() throws {
        let values = [
            "CAREGIVER_TOKEN": try caregiverToken(UUID()), "DEVICE_TOKEN": makeDeviceToken(), "INSTALLATION_ID": "i",
        ]
        let run = try Executables.run(
            "push-register", input: try Executables.fixture("push-register/valid.json", values),
            environment: testEnvironment(["DATABASE_URL": nil]))
        #expect(run.result.exitStatus == 0)
        #expect(run.response?.statusCode == 500)
        #expect(run.stderr.contains("\"config.variable\":\"DATABASE_URL\""))
        #expect(run.response?.body.contains("DATABASE_URL") == false)
    }

    @Test("an unreachable database is a 503 problem with Retry-After from the executable")
    func unreachableDatabase() throws {
        let values = [
            "CAREGIVER_TOKEN": try caregiverToken(UUID()), "DEVICE_TOKEN": makeDeviceToken(), "INSTALLATION_ID": "i",
        ]
        let run = try Executables.run(
            "push-register", input: try Executables.fixture("push-register/valid.json", values),
            environment: testEnvironment(["DATABASE_URL": "postgresql://postgres@127.0.0.1:1/none?connect_timeout=2"]))
        #expect(run.result.exitStatus == 0)
        #expect(run.response?.statusCode == 503)
        #expect(run.response?.headers["retry-after"] != nil)
    }

    @Test(
        "the recording functions refuse an anonymous caller with 401",
        arguments: [
            "dose-record", "slot-bulk-record", "prn-record",
        ])
    func recordingFunctionsNeedAuth(function: String) throws {
        let name = function == "dose-record" ? "dose-record/no-auth.json" : "\(function)/patient.json"
        let run = try Executables.run(
            function, input: try Executables.fixture(name, ["PATIENT_TOKEN": "pst_not-a-session"]))
        #expect(run.result.exitStatus == 0)
        #expect(run.response?.statusCode == 401)
        #expect(run.response?.headers["www-authenticate"] == "Bearer")
    }
}

/// The runner's one-shot commands, through the built `runner` binary.
@Suite("runner invoke and migrate")
struct RunnerCommandTests {
    @Test("runner invoke pipes a fixture file through the built function and prints its response")
    func invokeFile() throws {
        let caregiver = UUID()
        let token = makeDeviceToken()
        let event = try Executables.fixture(
            "push-register/valid.json",
            ["CAREGIVER_TOKEN": try caregiverToken(caregiver), "DEVICE_TOKEN": token, "INSTALLATION_ID": "i"])
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("event-\(UUID().uuidString).json")
        try event.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let run = try Executables.run(
            "runner",
            arguments: [
                "invoke", "push-register", file.path, "--functions",
                TestDatabase.repositoryRoot.appendingPathComponent("infra/functions.json").path,
            ],
            input: Data())
        #expect(run.result.exitStatus == 0)
        #expect(run.response?.statusCode == 200)
        #expect(try TestDatabase.with { try Seed.devices($0, token: token) }.first?.ownerID == caregiver)
    }

    @Test("runner invoke reads the event from stdin, and refuses a function the table does not name")
    func invokeStdinAndUnknownFunction() throws {
        let functions = TestDatabase.repositoryRoot.appendingPathComponent("infra/functions.json").path
        let event = try Executables.fixture("push-register/no-auth.json", ["DEVICE_TOKEN": makeDeviceToken()])
        let run = try Executables.run(
            "runner", arguments: ["invoke", "push-register", "--functions", functions], input: event)
        #expect(run.response?.statusCode == 401)
        let unknown = try Executables.run(
            "runner", arguments: ["invoke", "no-such-function", "--functions", functions], input: event)
        #expect(unknown.result.exitStatus != 0)
        #expect(unknown.stderr.contains("unknown function"))
    }

    @Test("runner migrate is repeatable: a second run applies nothing")
    func migrateTwice() throws {
        _ = TestDatabase.migrated
        let migrations = TestDatabase.migrationsDirectory.path
        // Migrations run as the schema's owner; the functions' runtime role may not (no CREATE, no DDL).
        let run = try Executables.run(
            "runner", arguments: ["migrate", "--migrations", migrations], input: Data(),
            environment: testEnvironment(["DATABASE_URL": TestDatabase.url]))
        #expect(run.result.exitStatus == 0)
        #expect(run.stderr.contains("\"migration.applied\":0"))
        let asRuntime = try Executables.run(
            "runner", arguments: ["migrate", "--migrations", migrations], input: Data())
        #expect(asRuntime.result.exitStatus != 0)
    }
}

import Codecs
import CaregiverPush
import Foundation
import Synchronization
import Testing
import TestFixtures
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// The gateway (under `runner serve`, which adds the FCM emulator) over real HTTP, in both modes (docs/behaviour.md#gateway).
@Suite("gateway serve")
struct GatewayServeTests {
    static let modes = ["cold", "warm"]

    static func server(_ mode: String, arguments: [String] = [], environment: [String: String] = testEnvironment())
        throws
        -> RunnerServer
    {
        _ = TestDatabase.migrated
        return try RunnerServer(arguments: ["--mode", mode, "--fcm-emulator"] + arguments, environment: environment)
    }

    @Test("every route's happy path, with x-request-id round-tripped to the function and back", arguments: modes)
    func happyPaths(mode: String) throws {
        let server = try Self.server(mode)
        let household = try RecordingHousehold.make(devicesPerCaregiver: [1])
        let caregiver = try caregiverToken(household.caregivers[0].id)
        let deviceToken = makeDeviceToken()
        let register = try server.post(
            "/api/push/register", bearer: caregiver,
            body: ["token": .string(deviceToken), "platform": .string("ios"), "environment": .string("DEV")],
            headers: ["x-request-id": "round-trip-\(mode)"])
        #expect(register.status == 200 && register.json == .object(["ok": .bool(true)]))
        #expect(register.headers["x-request-id"] == "round-trip-\(mode)")
        // The worker's log line reaches the gateway's stderr through a pipe, which may trail the response.
        #expect(eventually(seconds: 10) { server.stderr.contains("\"requestId\":\"round-trip-\(mode)\"") })
        #expect(
            try server.post("/api/push/unregister", bearer: caregiver, body: ["token": .string(deviceToken)]).status
                == 200)
        let patient = household.patientToken
        let dose = try server.post(
            "/api/dose-records", bearer: patient,
            body: [
                "medicationId": .string(household.morning[0].uuidString),
                "scheduledAt": .string(TokyoDay.instant(household.date, "07:00")),
            ])
        #expect(dose.status == 200 && dose.json?["updatedCount"] == .number(1))
        let slot = try server.post(
            "/api/dose-records/slot", bearer: patient,
            body: ["date": .string(household.date), "slot": .string("morning")])
        #expect(slot.status == 200 && slot.json?["updatedCount"] == .number(2))
        let prn = try server.post(
            "/api/prn-dose-records", bearer: patient, body: ["medicationId": .string(household.prn.uuidString)])
        #expect(prn.status == 200 && prn.json?["updatedCount"] == .number(1))
        #expect(server.stderr.contains("\"msg\":\"request\""))
    }

    @Test(
        "unknown route 404, wrong method 405 with Allow, body over the limit 413 — all problem+json", arguments: modes)
    func gatewayErrors(mode: String) throws {
        let server = try Self.server(mode, arguments: ["--max-body", "2048"])
        let missing = try server.request("GET", "/api/nothing-here")
        #expect(missing.status == 404 && missing.headers["content-type"] == "application/problem+json")
        let wrongMethod = try server.request("GET", "/api/push/register")
        #expect(wrongMethod.status == 405 && wrongMethod.headers["allow"] == "POST")
        let large = try server.request(
            "POST", "/api/push/register", headers: ["content-type": "application/json"],
            body: "{\"token\":\"\(String(repeating: "a", count: 4096))\"}")
        #expect(large.status == 413 && large.json?["type"] == .string("/problems/payload-too-large"))
    }

    @Test("a function that sleeps past its timeout is killed and answered 504", arguments: modes)
    func timeout(mode: String) throws {
        let scripts = try ScriptFunctions.make(timeoutSeconds: 2)
        var environment = testEnvironment()
        environment["SCRIPT_PID_DIR"] = scripts.directory.path
        let server = try RunnerServer(arguments: ["--mode", mode] + scripts.arguments, environment: environment)
        let answer = try server.request(
            "POST", "/test/sleepy", headers: ["content-type": "application/json"], body: "{}")
        #expect(answer.status == 504 && answer.json?["type"] == .string("/problems/gateway-timeout"))
        let pidText = try String(contentsOf: scripts.directory.appendingPathComponent("sleepy.pid"), encoding: .utf8)
        let pid = try #require(Int32(pidText.trimmingCharacters(in: .whitespacesAndNewlines)))
        var gone = false
        for _ in 0..<50 where !gone {
            gone = kill(pid, 0) != 0
            if !gone { Thread.sleep(forTimeInterval: 0.1) }
        }
        #expect(gone)
    }

    @Test(
        "a crash, or output that is not a response, is 502; a JSON value without statusCode is a 200", arguments: modes)
    func badFunctions(mode: String) throws {
        let scripts = try ScriptFunctions.make()
        let server = try RunnerServer(arguments: ["--mode", mode] + scripts.arguments, environment: testEnvironment())
        for name in ["crashy", "garbage"] {
            let answer = try server.request(
                "POST", "/test/\(name)", headers: ["content-type": "application/json"], body: "{}")
            #expect(answer.status == 502 && answer.json?["type"] == .string("/problems/bad-gateway"))
        }
        let bare = try server.request("POST", "/test/bare", headers: ["content-type": "application/json"], body: "{}")
        #expect(bare.status == 200 && bare.json == .object(["hello": .string("world")]))
        #expect(bare.headers["content-type"] == "application/json")
    }

    @Test(
        "at the concurrency cap requests queue briefly, then get 503 with Retry-After; then it recovers",
        arguments: modes)
    func concurrencyCap(mode: String) throws {
        let scripts = try ScriptFunctions.make()
        let server = try RunnerServer(
            arguments: ["--mode", mode, "--queue-timeout-ms", "200"] + scripts.arguments, environment: testEnvironment()
        )
        let statuses = Mutex<[Int]>([])
        let retryAfter = Mutex<[String]>([])
        let client = server.client
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            let answer = try? client.request(
                "POST", "/test/slow", headers: ["content-type": "application/json"], body: "{}")
            statuses.withLock { $0.append(answer?.status ?? -1) }
            if answer?.status == 503 { retryAfter.withLock { $0.append(answer?.headers["retry-after"] ?? "") } }
        }
        let seen = statuses.withLock { $0 }
        #expect(seen.filter { $0 == 200 }.count >= 1)
        #expect(seen.filter { $0 == 503 }.count >= 1)
        #expect(seen.allSatisfy { $0 == 200 || $0 == 503 })
        #expect(retryAfter.withLock { $0 }.allSatisfy { $0 == "1" })
        #expect(
            try server.request("POST", "/test/slow", headers: ["content-type": "application/json"], body: "{}").status
                == 200)
    }

    /// Makes the emulator answer after 1.5 s, then records the household's 07:00 dose as its patient.
    static func recordWithSlowFCM(_ server: RunnerServer, _ household: RecordingHousehold) throws
        -> RunnerClient.Answer
    {
        #expect(try server.post("/_emulator/fcm/config", bearer: nil, body: ["delayMs": .number(1500)]).status == 200)
        return try server.post(
            "/api/dose-records", bearer: household.patientToken,
            body: [
                "medicationId": .string(household.morning[0].uuidString),
                "scheduledAt": .string(TokyoDay.instant(household.date, "07:00")),
            ])
    }

    @Test("the response of dose-record arrives before its push reaches a slow FCM", arguments: modes)
    func responseBeforePush(mode: String) throws {
        let server = try Self.server(mode)
        let household = try RecordingHousehold.make(devicesPerCaregiver: [1])
        let dose = try Self.recordWithSlowFCM(server, household)
        let answeredAt = Date()
        #expect(dose.status == 200)
        var delivered: JSONValue?
        for _ in 0..<100 where delivered == nil {
            delivered = try server.request("GET", "/_emulator/fcm/messages").json?["messages"]?.arrayValue?.first
            if delivered == nil { Thread.sleep(forTimeInterval: 0.05) }
        }
        let message = try #require(delivered)
        let pushedAt = Date(timeIntervalSince1970: (message["receivedAtMs"]?.numberValue ?? 0) / 1000)
        #expect(answeredAt < pushedAt)
        #expect(message["token"]?.stringValue == household.caregivers[0].tokens[0])
    }

    @Test("SIGTERM drains an in-flight push before the gateway exits", arguments: modes)
    func drainOnSigterm(mode: String) throws {
        let server = try Self.server(mode)
        let household = try RecordingHousehold.make(devicesPerCaregiver: [1])
        let dose = try Self.recordWithSlowFCM(server, household)
        #expect(dose.status == 200)
        #expect(server.stop(signal: SIGTERM) == 0)
        let statuses = try TestDatabase.with { connection in
            try connection.query(
                """
                SELECT p.status FROM push_deliveries p JOIN push_devices d ON d.id = p.push_device_id
                WHERE d.token = \(household.caregivers[0].tokens[0])
                """
            ).map { try $0.decode(String.self, at: 0) }
        }
        #expect(statuses == ["SENT"])
        #expect(server.stderr.contains("\"msg\":\"draining\""))
    }

    @Test("warm: 100 sequential requests are served by the same worker processes")
    func warmReusesWorkers() throws {
        let server = try Self.server("warm", arguments: ["--warm-workers", "2", "--debug-headers"])
        let caregiver = try caregiverToken(UUID())
        var pids = Set<String>()
        for index in 0..<100 {
            let answer = try server.post(
                "/api/push/unregister", bearer: caregiver, body: ["token": .string("token-\(index)")])
            #expect(answer.status == 200)
            if let pid = answer.headers["x-gateway-pid"] { pids.insert(pid) }
        }
        #expect(!pids.isEmpty && pids.count <= 2)
    }

    @Test("warm: 20 concurrent requests all succeed")
    func warmConcurrent() throws {
        let server = try Self.server("warm")
        let caregiver = try caregiverToken(UUID())
        let statuses = Mutex<[Int]>([])
        let client = server.client
        DispatchQueue.concurrentPerform(iterations: 20) { _ in
            let answer = try? client.post(
                "/api/push/register", bearer: caregiver,
                body: ["token": .string(makeDeviceToken()), "platform": .string("ios"), "environment": .string("DEV")])
            statuses.withLock { $0.append(answer?.status ?? -1) }
        }
        #expect(statuses.withLock { $0 }.count == 20)
        #expect(statuses.withLock { $0 }.allSatisfy { $0 == 200 })
    }

    @Test("warm: a worker that crashes is replaced")
    func warmReplacesDeadWorker() throws {
        let scripts = try ScriptFunctions.make()
        let server = try RunnerServer(
            arguments: ["--mode", "warm"] + scripts.arguments, environment: testEnvironment())
        for _ in 0..<3 {
            let answer = try server.request(
                "POST", "/test/crashy", headers: ["content-type": "application/json"], body: "{}")
            #expect(answer.status == 502)
        }
        #expect(
            try server.request("POST", "/test/bare", headers: ["content-type": "application/json"], body: "{}").status
                == 200)
        #expect(server.stderr.contains("warm worker replaced"))
    }
}

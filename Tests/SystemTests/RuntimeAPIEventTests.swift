import Codecs
import CaregiverPush
import Foundation
import Testing
import TestFixtures
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A built function in Runtime-API mode fed events it cannot take: it answers each with a problem and goes on to
/// the next, up to Lambda's own 6 MB event limit and past it.
@Suite("Runtime-API loop and oversized events", .timeLimit(.minutes(2)))
struct RuntimeAPIEventTests {
    /// A local Runtime API (Python's http.server, answering as AWS's does) that hands out the events (files named
    /// after the first two arguments) in order, appends `{"kind": "response"|"error", "body": …}` for each answer to
    /// the file named by the second argument (with the client's port, which names its connection; each `next`'s
    /// port goes to that file + ".next"), writes its port to the first, and holds `next` once all are out.
    /// `NEXT_CHUNKED=1`: each event is sent with `Transfer-Encoding: chunked`, as Go's net/http (AWS's Runtime API is a
    /// Go server) sends a body whose length it was not told. `CLOSE_AFTER_ANSWER=1`: the connection is closed after
    /// each answer without a `Connection: close`, as a host drops a kept-alive connection it no longer wants.
    static let fakeRuntimeAPI = #"""
        import http.server, json, os, sys, threading, time, uuid
        port_file, answers_file = sys.argv[1], sys.argv[2]
        # REFUSE_RESPONSES=1: every `/response` is refused with a 500, as the Runtime API refuses a result it cannot
        # take (an invocation already answered, or timed out).
        refuse = os.environ.get("REFUSE_RESPONSES") == "1"
        chunked = os.environ.get("NEXT_CHUNKED") == "1"
        close_after = os.environ.get("CLOSE_AFTER_ANSWER") == "1"
        events = [open(path, "rb").read() for path in sys.argv[3:]]
        lock = threading.Lock()
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def log_message(self, *args):
                pass
            def do_GET(self):
                with lock, open(answers_file + ".next", "a") as nexts:
                    nexts.write(str(self.client_address[1]) + "\n")
                with lock:
                    event = events.pop(0) if events else None
                if event is None:
                    time.sleep(3600)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Lambda-Runtime-Aws-Request-Id", str(uuid.uuid4()))
                self.send_header("Lambda-Runtime-Deadline-Ms", str(int(time.time() * 1000) + 20000))
                if chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for start in range(0, len(event), 65536):
                        part = event[start:start + 65536]
                        self.wfile.write(b"%x;ext=1\r\n" % len(part) + part + b"\r\n")
                    self.wfile.write(b"0\r\nX-Trailer: t\r\n\r\n")
                else:
                    self.send_header("Content-Length", str(len(event)))
                    self.end_headers()
                    self.wfile.write(event)
                self.close_connection = close_after
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                kind = "response" if self.path.endswith("/response") else "error"
                with lock, open(answers_file, "a") as answers:
                    answers.write(json.dumps({"kind": kind, "body": body.decode("utf-8", "replace"),
                                              "port": self.client_address[1]}) + "\n")
                self.send_response(500 if refuse and kind == "response" else 202)
                self.send_header("Content-Length", "0")
                self.end_headers()
                self.close_connection = close_after
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        with open(port_file + ".tmp", "w") as out:
            out.write(str(server.server_address[1]))
        import os
        os.rename(port_file + ".tmp", port_file)
        server.serve_forever()
        """#

    /// Starts ``fakeRuntimeAPI`` in `directory` (its `port` and `answers` files there) handing out `events` (files),
    /// and waits for its port.
    static func startFakeRuntimeAPI(
        in directory: URL, events: [String], refusingResponses: Bool = false, settings: [String: String] = [:]
    ) throws -> (Process, Int) {
        let portFile = directory.appendingPathComponent("port").path
        let answersFile = directory.appendingPathComponent("answers").path
        let api = Process()
        api.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        api.arguments = ["python3", "-c", fakeRuntimeAPI, portFile, answersFile] + events
        var environment = settings
        if refusingResponses { environment["REFUSE_RESPONSES"] = "1" }
        if !environment.isEmpty {
            api.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        api.standardInput = FileHandle.nullDevice
        api.standardOutput = FileHandle.nullDevice
        try api.run()
        waitFor { FileManager.default.fileExists(atPath: portFile) }
        guard let port = (try? String(contentsOfFile: portFile, encoding: .utf8)).flatMap({ Int($0) }) else {
            kill(api.processIdentifier, SIGKILL)
            api.waitUntilExit()
            throw FakeAPIWroteNoPort()
        }
        return (api, port)
    }

    struct FakeAPIWroteNoPort: Error {}

    /// Polls `ready` every 50 ms for at most 30 s.
    static func waitFor(_ ready: () -> Bool) {
        for _ in 0..<600 where !ready() { Thread.sleep(forTimeInterval: 0.05) }
    }

    /// What a push-register worker answered to `events`, handed out by ``fakeRuntimeAPI`` with `settings`: each
    /// answer's status code, the client ports every `next` and answer came from, and whether the worker is still up.
    static func answers(to events: [Data], settings: [String: String] = [:]) throws -> (
        statuses: [Int], ports: Set<Int>, nexts: Int, running: Bool
    ) {
        _ = TestDatabase.migrated
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("runtime-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var paths: [String] = []
        for (index, event) in events.enumerated() {
            let file = directory.appendingPathComponent("event-\(index).json")
            try event.write(to: file)
            paths.append(file.path)
        }
        let answersFile = directory.appendingPathComponent("answers").path
        let (api, port) = try Self.startFakeRuntimeAPI(in: directory, events: paths, settings: settings)
        defer {
            kill(api.processIdentifier, SIGKILL)
            api.waitUntilExit()
        }

        let worker = try RuntimeAPIWorker("push-register", port: port, environment: testEnvironment())
        defer { worker.stop() }
        func answers() -> [String] {
            ((try? String(contentsOfFile: answersFile, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        let nextsFile = answersFile + ".next"
        func nexts() -> [Int] {
            ((try? String(contentsOfFile: nextsFile, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
                Int($0)
            }
        }
        // Every event answered, and the worker back for the one after.
        Self.waitFor { answers().count >= events.count && nexts().count > events.count }
        var statuses: [Int] = []
        var ports: Set<Int> = []
        for line in answers() {
            let answer = try JSONValue.parse(Array(line.utf8))
            #expect(answer["kind"] == .string("response"))
            let document = try JSONValue.parse(Array((answer["body"]?.stringValue ?? "").utf8))
            statuses.append(Int(document["statusCode"]?.integerValue ?? 0))
            ports.insert(Int(answer["port"]?.integerValue ?? 0))
        }
        ports.formUnion(nexts())
        return (statuses, ports, nexts().count, worker.isRunning)
    }

    /// Three 2 MiB events, a 7 MiB one, non-JSON, and a registration without a token.
    static func events() -> [Data] {
        let big = makeEvent(
            path: "/api/push/register", bearer: "x", body: String(repeating: "a", count: 2 * 1024 * 1024))
        return [
            big, big, big, Data(repeating: UInt8(ascii: " "), count: 7 * 1024 * 1024), Data("not json".utf8),
            makeEvent(path: "/api/push/register", bearer: nil, body: "{}"),
        ]
    }

    @Test(
        "2 MiB events, a 7 MiB one and non-JSON get 413/400 problems; the worker stays up for the next event, every next and answer on one kept-alive connection"
    )
    func oversizedAndMalformedEvents() throws {
        let events = Self.events()
        let run = try Self.answers(to: events)
        // Like a C runtime, one connection to the host for the whole loop: no connect per invocation.
        #expect(run.nexts > events.count && run.ports.count == 1, "connections (client ports): \(run.ports)")
        #expect(run.statuses == [413, 413, 413, 413, 400, 401])
        // Still waiting for its next event, not gone.
        #expect(run.running)
    }

    @Test(
        "events sent chunked (as Go's net/http, AWS's Runtime API, sends a body it did not measure) by a host that drops the connection after each answer: the same answers, each request on a new connection"
    )
    func chunkedEventsAndDroppedConnections() throws {
        let events = Self.events()
        let run = try Self.answers(to: events, settings: ["NEXT_CHUNKED": "1", "CLOSE_AFTER_ANSWER": "1"])
        #expect(run.statuses == [413, 413, 413, 413, 400, 401])
        // A `next` and an answer per event, each on a connection of its own, and the last `next` on one more.
        #expect(run.ports.count == 2 * events.count + 1, "connections (client ports): \(run.ports)")
        #expect(run.running)
    }

    @Test("a response the Runtime API refuses is not taken as delivered: the recording's push is not sent after it")
    func refusedResponseSendsNoPush() throws {
        let fake = try FCMFake()
        let token = makeDeviceToken()
        let (patientToken, body) = try TestDatabase.with { connection in
            let patient = try Seed.patient(connection)
            let caregiver = UUID()
            try Seed.link(connection, caregiver: caregiver, patient: patient)
            try Seed.registerDevice(token, caregiver: caregiver, connection: connection)
            let medication = try Seed.medication(connection, patient: patient, times: ["08:00"])
            return (
                try Seed.session(connection, patient: patient),
                json([
                    "medicationId": .string(medication.uuidString),
                    "scheduledAt": .string(TokyoDay.instant(TokyoDay.offset(-1), "08:00")),
                ])
            )
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("runtime-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let eventFile = directory.appendingPathComponent("event.json")
        try makeEvent(path: "/api/dose-records", bearer: patientToken, body: body).write(to: eventFile)
        let answersFile = directory.appendingPathComponent("answers").path
        let (api, port) = try Self.startFakeRuntimeAPI(in: directory, events: [eventFile.path], refusingResponses: true)
        defer {
            kill(api.processIdentifier, SIGKILL)
            api.waitUntilExit()
        }
        let worker = try RuntimeAPIWorker("dose-record", port: port, environment: fake.environment())
        defer { worker.stop() }
        let nexts = answersFile + ".next"
        // Its answer was posted (and refused); then the worker asks for its next event: the invocation is over.
        Self.waitFor { ((try? String(contentsOfFile: nexts, encoding: .utf8)) ?? "").split(separator: "\n").count >= 2 }
        let answers = ((try? String(contentsOfFile: answersFile, encoding: .utf8)) ?? "").split(separator: "\n")
        #expect(answers.count == 1, "\(answers)")
        let answer = try JSONValue.parse(Array((answers.first ?? "").utf8))
        #expect(answer["kind"] == .string("response"))
        let document = try JSONValue.parse(Array((answer["body"]?.stringValue ?? "").utf8))
        #expect(document["statusCode"]?.integerValue == 200)
        // The dose is recorded and its push owed (push-sweep sends it), but nothing was sent after the refusal.
        #expect(try fake.messages(to: [token]).isEmpty)
        let statuses = try TestDatabase.with { connection in
            try connection.query(
                """
                SELECT d.status FROM caregiver_push.push_deliveries d
                JOIN caregiver_push.push_devices v ON v.id = d.push_device_id
                WHERE v.token = \(token)
                """
            ).map { try $0.decode(String.self, at: 0) }
        }
        // Leased to the recording's sender by its transaction, and never sent: the lease runs out, then the sweep.
        #expect(statuses == ["SENDING"])
        #expect(worker.isRunning)
    }
}

import Codecs
import CaregiverPush
import Curl
import Foundation
import Synchronization
import Testing
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// The public edge under abuse (docs/behaviour.md#gateway): memory per request bounded before anything else, pipelined
/// heads and per-client connections counted, a host that heals a worker it cannot start, health answers, and the
/// dev-only key material kept off the public port and off the disk.
@Suite("gateway edge under abuse", .timeLimit(.minutes(3)))
struct GatewayEdgeTests {
    /// `echo`-like script functions: `small` takes 100 bytes, `roomy` 1 MiB (its events can outgrow Lambda's 6 MB).
    static func limitedFunctions() throws -> ScriptFunctions {
        let answer = """
            if [ -n "$AWS_LAMBDA_RUNTIME_API" ]; then
              while true; do \(ScriptFunctions.next); reply '{"statusCode":200,"body":"taken"}'; done
            fi
            cat > /dev/null; echo '{"statusCode":200,"body":"taken"}'
            """
        return try ScriptFunctions.make([
            "small": .init(body: answer, maxBodyBytes: 100),
            "roomy": .init(body: answer, maxBodyBytes: 1024 * 1024),
        ])
    }

    /// The gateway's resident-set high-water mark and current size, in KiB.
    static func memory(of pid: Int32) throws -> (peak: Int, current: Int) {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        func field(_ name: String) -> Int {
            let line = status.split(separator: "\n").first { $0.hasPrefix(name + ":") } ?? ""
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
        }
        return (field("VmHWM"), field("VmRSS"))
    }

    @Test("a body over the function's limit is a 413 from its Content-Length alone; the connection then closes")
    func declaredBodyOverLimit() throws {
        let server = try RunnerServer(arguments: ["--mode", "cold"], environment: testEnvironment())
        let connection = try RawConnection(port: server.port)
        // Not one byte of the declared megabyte is sent: the answer cannot have waited for it.
        connection.send(
            "POST /api/dose-records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + "Content-Length: 1048576\r\n\r\n")
        let answer = connection.receive(for: 10)
        #expect(answer.text.hasPrefix("HTTP/1.1 413 "))
        #expect(answer.text.contains("/problems/payload-too-large") && answer.text.contains("at most 16384 bytes"))
        #expect(answer.closed)
    }

    @Test("a chunked body is read only up to the function's limit: 413, and the connection closes")
    func chunkedBodyOverLimit() throws {
        let server = try RunnerServer(arguments: ["--mode", "cold"], environment: testEnvironment())
        let connection = try RawConnection(port: server.port)
        let chunk = String(repeating: "a", count: 20 * 1024)
        // The body never ends: only a gateway that stops at the limit can answer.
        connection.send(
            "POST /api/dose-records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + "Transfer-Encoding: chunked\r\n\r\n\(String(chunk.utf8.count, radix: 16))\r\n\(chunk)\r\n")
        let answer = connection.receive(for: 10)
        #expect(answer.text.hasPrefix("HTTP/1.1 413 "))
        #expect(answer.closed)
    }

    @Test(
        "each function's maxBodyBytes is its limit at the gateway; an event past Lambda's 6 MB never reaches a worker",
        arguments: GatewayServeTests.modes)
    func perFunctionLimit(mode: String) throws {
        let scripts = try Self.limitedFunctions()
        let server = try RunnerServer(
            arguments: ["--mode", mode, "--warm-workers", "1"] + scripts.arguments, environment: testEnvironment())
        let json = ["content-type": "application/json"]
        let fits = try server.request("POST", "/test/small", headers: json, body: String(repeating: "a", count: 100))
        #expect(fits.status == 200)
        let over = try server.request("POST", "/test/small", headers: json, body: String(repeating: "a", count: 101))
        #expect(over.status == 413 && over.json?["detail"] == .string("The request body must be at most 100 bytes."))
        // 1 MiB of control bytes is within `roomy`'s limit, but as JSON escapes its event would be over 6 MB.
        let escaped = try server.request(
            "POST", "/test/roomy", headers: json, body: String(repeating: "\u{01}", count: 1024 * 1024))
        #expect(escaped.status == 413)
        let plain = try server.request(
            "POST", "/test/roomy", headers: json, body: String(repeating: "a", count: 512 * 1024))
        #expect(plain.status == 200)
    }

    @Test("50 concurrent 1 MiB bodies leave the gateway's memory where it was (peak within 32 MiB)")
    func concurrentLargeBodies() throws {
        let server = try RunnerServer(arguments: ["--mode", "cold"], environment: testEnvironment())
        let port = server.port
        // 50 small requests first: what serving 50 connections at once costs whatever their bodies.
        let send = { (body: String) in
            let threads = (0..<50).map { _ in
                Thread {
                    guard let connection = try? RawConnection(port: port) else { return }
                    connection.send(
                        "POST /api/dose-records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            + "Connection: close\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
                    _ = connection.status(within: 20)
                }
            }
            for thread in threads { thread.start() }
            while threads.contains(where: { !$0.isFinished }) { Thread.sleep(forTimeInterval: 0.05) }
        }
        send("{}")
        let before = try Self.memory(of: server.pid)
        send(String(repeating: "\u{01}", count: 1024 * 1024))
        let after = try Self.memory(of: server.pid)
        // Unbounded, each body was buffered and escaped sixfold into an event: hundreds of MiB.
        #expect(after.peak - before.peak < 32 * 1024, "peak grew by \(after.peak - before.peak) KiB")
        #expect(after.current - before.current < 32 * 1024)
    }

    @Test("a head pipelined behind another in one packet is held to the header limits like any other")
    func pipelinedHeads() throws {
        let server = try GatewayHardeningTests.limitedServer()
        let connection = try RawConnection(port: server.port)
        // 6000 bytes: over the gateway's 4096, under the decoder's own 8192 (twice the limit).
        connection.send(
            "GET /api/first HTTP/1.1\r\nHost: x\r\n\r\n"
                + "GET /api/second HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "a", count: 6000))\r\n\r\n")
        let answer = connection.receive(for: 15)
        #expect(answer.text.hasPrefix("HTTP/1.1 404 "))
        #expect(answer.text.contains("HTTP/1.1 431 "))
        #expect(!answer.text.contains("second"))
        #expect(answer.closed)
    }

    @Test("a head over the limit pipelined behind a request still being answered: that answer first, then the 431")
    func oversizedHeadBehindPendingAnswer() throws {
        let scripts = try ScriptFunctions.make([
            "slow": .init(
                body:
                    "while true; do \(ScriptFunctions.next); sleep 1; reply '{\"statusCode\":200,\"body\":\"stored\"}'; done",
                concurrency: 1)
        ])
        let server = try RunnerServer(
            arguments: ["--mode", "warm", "--warm-workers", "1", "--max-header-bytes", "4096"] + scripts.arguments,
            environment: testEnvironment())
        let connection = try RawConnection(port: server.port)
        connection.send(
            "POST /test/slow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
        // Its own read, while the first is still being answered: the guard's byte count sees it, not the decoder.
        Thread.sleep(forTimeInterval: 0.3)
        connection.send("GET /api/second HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "a", count: 6000))\r\n\r\n")
        let answer = connection.receive(for: 15)
        #expect(answer.text.hasPrefix("HTTP/1.1 200 "), "\(answer.text.prefix(200))")
        #expect(answer.text.contains("stored"))
        #expect(answer.text.contains("HTTP/1.1 431 "))
        #expect(answer.closed)
    }

    @Test("an x-request-id that could add fields to the worker's trace id is replaced; a plain one is kept")
    func traceIDFromRequestID() throws {
        let scripts = try ScriptFunctions.make([
            "tracer": .init(
                body: #"""
                    while true; do \#(ScriptFunctions.next)
                    trace=$(grep -i '^lambda-runtime-trace-id:' "$TMPDIR_SCRIPT/headers" | cut -d' ' -f2- | tr -d '\r"')
                    reply "{\"statusCode\":200,\"body\":\"$trace\"}"; done
                    """#)
        ])
        let server = try RunnerServer(
            arguments: ["--mode", "warm", "--warm-workers", "1"] + scripts.arguments, environment: testEnvironment())
        let json = ["content-type": "application/json"]
        let plain = try server.request(
            "POST", "/test/tracer", headers: json.merging(["x-request-id": "req-42.a:b_c"]) { $1 }, body: "{}")
        #expect(String(decoding: plain.body, as: UTF8.self) == "Root=1-req-42.a:b_c")
        #expect(plain.headers["x-request-id"] == "req-42.a:b_c")
        for hostile in ["abc;Parent=53995c3f42cd8ad8;Sampled=1", "abc Sampled=1", "a,b"] {
            let answer = try server.request(
                "POST", "/test/tracer", headers: json.merging(["x-request-id": hostile]) { $1 }, body: "{}")
            let trace = String(decoding: answer.body, as: UTF8.self)
            #expect(answer.status == 200 && trace.hasPrefix("Root=1-"), "\(trace)")
            #expect(!trace.contains(";") && !trace.contains("Sampled") && !trace.contains(","), "\(trace)")
            #expect(answer.headers["x-request-id"] != hostile)
        }
    }

    @Test(
        "the emulator's routes answer the developer only: a rebinding Host, another page's Origin or a non-JSON POST is refused"
    )
    func emulatorDoors() throws {
        _ = TestDatabase.migrated
        let server = try RunnerServer(arguments: ["--mode", "cold", "--fcm-emulator"], environment: testEnvironment())
        let json = ["content-type": "application/json"]
        let own = "127.0.0.1:\(server.port)"
        #expect(try server.request("GET", "/_emulator/fcm/messages").status == 200)
        #expect(try server.request("POST", "/_emulator/fcm/reset", headers: json, body: "{}").status == 200)
        #expect(
            try server.request(
                "POST", "/_emulator/fcm/config", headers: json.merging(["origin": "http://\(own)"]) { $1 },
                body: #"{"delayMs":0}"#
            ).status == 200)
        for path in ["/_emulator/fcm/messages", "/_emulator/fcm/requests", "/_emulator/fcm/stats"] {
            for host in ["evil.example:\(server.port)", "127.0.0.1.evil.example"] {
                #expect(try server.request("GET", path, headers: ["host": host]).status == 403, "\(path) \(host)")
            }
            #expect(
                try server.request("GET", path, headers: ["sec-fetch-site": "cross-site"]).status == 403, "\(path)")
        }
        for path in ["/_emulator/fcm/reset", "/_emulator/fcm/config"] {
            // A form or a no-cors fetch of another site: no preflight, so only the server can refuse it.
            #expect(
                try server.request("POST", path, headers: ["content-type": "text/plain"], body: #"{"failAll":true}"#)
                    .status == 415, "\(path)")
            #expect(try server.request("POST", path, body: "").status == 415, "\(path)")
            for origin in ["http://evil.example", "null", "http://127.0.0.1:1"] {
                #expect(
                    try server.request(
                        "POST", path, headers: json.merging(["origin": origin]) { $1 }, body: "{}"
                    ).status == 403, "\(path) \(origin)")
            }
        }
    }

    @Test("the standalone emulator's JWKS control routes refuse another page's POST")
    func standaloneJWKSDoors() throws {
        let fake = try FCMFake()
        for (headers, status) in [
            ([("Content-Type", "text/plain")], 415),
            ([("Content-Type", "application/json"), ("Origin", "http://evil.example")], 403),
        ] {
            let request = CurlRequest(
                method: "POST", url: fake.baseURL + "/_emulator/jwks", headers: headers,
                body: Array(#"{"keys":[]}"#.utf8))
            guard case .success(let answer) = CurlClient.perform(request, timeoutMilliseconds: 5000) else {
                Issue.record("no answer")
                continue
            }
            #expect(answer.status == status)
        }
        #expect(try fake.jwksFetches == 0)
        try fake.serveJWKS(keys: [])
    }

    @Test("one client gets its share of requests in flight: one more is a 429 at once, another client is served")
    func perClientRequestShare() throws {
        let scripts = try ScriptFunctions.make([
            "slow": .init(
                body:
                    "while true; do \(ScriptFunctions.next); sleep 1; reply '{\"statusCode\":200,\"body\":\"done\"}'; done",
                concurrency: 4)
        ])
        let server = try RunnerServer(
            arguments: [
                "--mode", "warm", "--warm-workers", "4", "--max-requests-per-client", "2",
                "--client-address-header", "x-forwarded-for", "--trusted-proxy", "127.0.0.0/8,10.0.0.0/8",
            ] + scripts.arguments,
            environment: testEnvironment())
        let gateway = server.client
        @Sendable func post(from client: String) -> RunnerClient.Answer? {
            try? gateway.request(
                "POST", "/test/slow", headers: ["content-type": "application/json", "x-forwarded-for": client],
                body: "{}")
        }
        // Two of one client's requests in flight, through Knative's proxies (each appends the address it was reached
        // from; what the client names itself first does not count), then a third.
        let answers = Mutex<[String: [Int]]>([:])
        let threads = (0..<2).map { index in
            Thread {
                let chain = index == 0 ? "203.0.113.7, 10.8.0.4, 10.8.1.9" : "198.51.100.9, 203.0.113.7, 10.8.0.4"
                let status = post(from: chain)?.status ?? -1
                answers.withLock { $0["flooder", default: []].append(status) }
            }
        }
        for thread in threads { thread.start() }
        Thread.sleep(forTimeInterval: 0.4)
        let started = Date()
        let third = post(from: "203.0.113.7, 10.8.0.4")
        #expect(third?.status == 429 && Date().timeIntervalSince(started) < 0.5)
        #expect(third?.headers["retry-after"] == "1")
        #expect(third?.json?["type"] == .string("/problems/too-many-requests"))
        // Another client is served meanwhile.
        #expect(post(from: "198.51.100.9")?.status == 200)
        while threads.contains(where: { !$0.isFinished }) { Thread.sleep(forTimeInterval: 0.05) }
        #expect(answers.withLock { $0["flooder"] ?? [] } == [200, 200])
        #expect(server.logs(#""http.limit":"max_requests_per_client""#))
        // Its requests answered, the client has its share again.
        #expect(post(from: "203.0.113.7")?.status == 200)
    }

    @Test("one client address gets its share of the connections, not all of them")
    func perClientShare() throws {
        let server = try RunnerServer(
            arguments: ["--mode", "cold", "--max-connections-per-client", "2", "--idle-timeout-ms", "60000"],
            environment: testEnvironment())
        let held = try (0..<2).map { _ in try RawConnection(port: server.port) }
        for connection in held {
            connection.send("GET /api/nothing HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(connection.status(within: 15) == 404)
        }
        let third = try RawConnection(port: server.port)
        third.send("GET /api/nothing HTTP/1.1\r\nHost: x\r\n\r\n")
        let refused = third.receive(for: 15)
        #expect(refused.text.hasPrefix("HTTP/1.1 503 ") && refused.text.lowercased().contains("retry-after: 1"))
        #expect(server.logs(#""http.limit":"max_connections_per_client""#))
    }

    @Test("a warm worker that cannot start is retried with backoff: 503 + Retry-After and not ready meanwhile")
    func workerHeals() throws {
        let scripts = try ScriptFunctions.make([
            "phoenix": .init(
                body: """
                    while true; do \(ScriptFunctions.next); reply '{"statusCode":200,"body":"alive"}'; done
                    """,
                concurrency: 1)
        ])
        let server = try RunnerServer(
            arguments: ["--mode", "warm", "--warm-workers", "1", "--debug-headers", "--queue-timeout-ms", "1000"]
                + scripts.arguments,
            environment: testEnvironment())
        let json = ["content-type": "application/json"]
        let first = try server.request("POST", "/test/phoenix", headers: json, body: "{}")
        #expect(first.status == 200)
        #expect(try server.request("GET", "/healthz").status == 200)
        #expect(try server.request("GET", "/readyz").status == 200)
        // The binary goes away and the worker dies: every start fails until the binary is back.
        let binary = scripts.directory.appendingPathComponent("phoenix")
        let aside = scripts.directory.appendingPathComponent("phoenix.aside")
        try FileManager.default.moveItem(at: binary, to: aside)
        let pid = try #require(first.headers["x-gateway-pid"].flatMap(Int32.init))
        kill(pid, SIGKILL)
        #expect(server.logs("warm worker could not start; retrying"))
        let unready = try server.request("GET", "/readyz")
        #expect(unready.status == 503 && unready.headers["retry-after"] != nil)
        // The public port does not name the function; the log does.
        #expect(unready.json?["detail"] == .string("Not ready: a function has no live worker."))
        #expect(!String(decoding: unready.body, as: UTF8.self).contains("phoenix"))
        #expect(server.logs(#""functions":"phoenix""#))
        let refused = try server.request("POST", "/test/phoenix", headers: json, body: "{}")
        #expect(refused.status == 503 && refused.headers["retry-after"].flatMap(Int.init) ?? 0 >= 1)
        #expect(try server.request("GET", "/healthz").status == 200)
        // Back in place: a retry finds it, and the function answers again.
        try FileManager.default.moveItem(at: aside, to: binary)
        var healed = false
        for _ in 0..<100 where !healed {
            healed = try server.request("POST", "/test/phoenix", headers: json, body: "{}").status == 200
            if !healed { Thread.sleep(forTimeInterval: 0.2) }
        }
        #expect(healed)
        #expect(try server.request("GET", "/readyz").status == 200)
    }

    @Test("the fake Supabase JWKS routes are not on the gateway's public port, even with the FCM emulator")
    func noJWKSRoutesOnThePublicPort() throws {
        let server = try RunnerServer(arguments: ["--mode", "cold", "--fcm-emulator"], environment: testEnvironment())
        let replace = try server.request("PUT", "/_emulator/jwks", body: #"{"keys":[]}"#)
        #expect(replace.status == 404)
        #expect(try server.request("POST", "/_emulator/jwks/down", body: #"{"down":true}"#).status == 404)
        #expect(try server.request("GET", "/auth/v1/.well-known/jwks.json").status == 404)
        // The emulator's own inspection routes are still there.
        #expect(try server.request("GET", "/_emulator/fcm/stats").status == 200)
    }

    @Test("the emulator's throwaway CA key is deleted once it has signed, and its TLS directory on exit")
    func emulatorKeyMaterial() throws {
        let server = try RunnerServer(arguments: ["--mode", "cold", "--fcm-emulator"], environment: testEnvironment())
        #expect(server.logs("fcm emulator listening over TLS"))
        let line = try #require(server.stderr.split(separator: "\n").first { $0.contains("tls.ca_file") })
        let caFile = try #require(try JSONValue.parse(Array(line.utf8))["tls.ca_file"]?.stringValue)
        let directory = (caFile as NSString).deletingLastPathComponent
        let files = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(!files.contains("ca.key"))
        let mode = try FileManager.default.attributesOfItem(atPath: directory)[.posixPermissions] as? Int
        #expect(mode == 0o700)
        #expect(server.stop() == 0)
        #expect(!FileManager.default.fileExists(atPath: directory))
    }
}

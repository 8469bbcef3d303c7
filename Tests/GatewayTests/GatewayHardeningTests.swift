import Codecs
import Curl
import OpenSSLCrypto
import ProcessSupervision
import CaregiverPush
import Foundation
import Synchronization
import Testing
import TestFixtures
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// The gateway (here under `runner serve`, which adds only the FCM emulator) as the host that faces the internet: a stranger on the public port, invocations bounded like
/// Lambda's, and the public port's limits against hostile HTTP.
@Suite("gateway serve hardening", .timeLimit(.minutes(3)))
struct GatewayHardeningTests {
    // MARK: The Runtime API is not on the public port

    /// The `AWS_LAMBDA_RUNTIME_API` of each warm worker of the gateway process `gateway` (read from /proc, as
    /// another local user of the same account could).
    static func workerRuntimeAPIs(gateway: Int32) throws -> [String] {
        var apis: [String] = []
        for entry in try FileManager.default.contentsOfDirectory(atPath: "/proc") {
            guard let pid = Int32(entry),
                let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 2, Int32(fields[1]) == gateway,
                let environ = FileManager.default.contents(atPath: "/proc/\(pid)/environ")
            else { continue }
            for variable in environ.split(separator: 0) {
                let text = String(decoding: variable, as: UTF8.self)
                if text.hasPrefix("AWS_LAMBDA_RUNTIME_API=") { apis.append(String(text.dropFirst(23))) }
            }
        }
        return apis
    }

    @Test("a stranger on the public port gets 404 for every Runtime API path, real worker secrets included")
    func strangerOnThePublicPort() throws {
        let server = try GatewayServeTests.server("warm", arguments: ["--warm-workers", "2"])
        let caregiver = try caregiverToken(UUID())
        // The workers start once the port is bound; wait until all of them (two per routed function of the table)
        // have their secrets.
        let table = try FunctionTable(
            contentsOf: TestDatabase.repositoryRoot.appendingPathComponent("infra/functions.json"))
        // `RunnerServer` turns schedules off, and scheduled functions then get no workers (deploy-time ones never do).
        let workers = table.functions.filter { $0.routeKey != nil }.reduce(0) { $0 + min(2, $1.concurrency) }
        var apis: [String] = []
        for _ in 0..<100 where apis.count < workers {
            apis = try Self.workerRuntimeAPIs(gateway: server.pid)
            if apis.count < workers { Thread.sleep(forTimeInterval: 0.05) }
        }
        #expect(apis.count == workers)
        var secrets: [String] = []
        for api in apis {
            // 127.0.0.1:PORT/SECRET: loopback, another port than the public one, and a secret of ≥ 128 bits.
            let parts = api.split(separator: "/", maxSplits: 1)
            let hostPort = parts[0].split(separator: ":")
            #expect(hostPort.first == "127.0.0.1")
            #expect(Int(hostPort.last ?? "") != server.port)
            let secret = String(parts.count > 1 ? parts[1] : "")
            #expect((Base64URL.decode(secret)?.count ?? 0) >= 16)
            secrets.append(secret)
        }
        #expect(Set(secrets).count == secrets.count)

        var strangerPaths = ["/2018-06-01/runtime/invocation/next", "/2018-06-01/runtime/init/error"]
        let guessed = ["push-register/1", "push-register/2", "dose-record/1", "prn-record/10", "x/0"]
        for prefix in guessed + secrets.prefix(4) {
            strangerPaths += [
                "/\(prefix)/2018-06-01/runtime/invocation/next", "/\(prefix)/2018-06-01/runtime/init/error",
                "/\(prefix)/2018-06-01/runtime/invocation/\(UUID().uuidString.lowercased())/response",
                "/\(prefix)/2018-06-01/runtime/invocation/\(UUID().uuidString.lowercased())/error",
            ]
        }
        let paths = strangerPaths
        let strangerAnswers = Mutex<[(path: String, status: Int, type: String?)]>([])
        let realAnswers = Mutex<[RunnerClient.Answer]>([])
        let client = server.client
        // Real requests and the stranger's at the same time.
        DispatchQueue.concurrentPerform(iterations: 2 + paths.count * 2) { index in
            if index < 2 {
                for _ in 0..<10 {
                    if let answer = try? client.post(
                        "/api/push/register", bearer: caregiver,
                        body: [
                            "token": .string(makeDeviceToken()), "platform": .string("ios"),
                            "environment": .string("DEV"),
                        ])
                    {
                        realAnswers.withLock { $0.append(answer) }
                    }
                }
                return
            }
            let path = paths[(index - 2) / 2]
            let method = index % 2 == 0 ? "GET" : "POST"
            let answer = try? client.request(
                method, path, headers: ["content-type": "application/json"],
                body: method == "POST" ? #"{"statusCode":200,"body":"forged"}"# : nil, timeoutMilliseconds: 10_000)
            strangerAnswers.withLock {
                $0.append((path, answer?.status ?? -1, answer?.json?["type"]?.stringValue))
            }
        }
        let stranger = strangerAnswers.withLock { $0 }
        #expect(stranger.count == strangerPaths.count * 2)
        for answer in stranger where answer.status != 404 || answer.type != "/problems/not-found" {
            Issue.record("\(answer.path) answered \(answer.status) \(answer.type ?? "-")")
        }
        let real = realAnswers.withLock { $0 }
        #expect(real.count == 20)
        #expect(real.allSatisfy { $0.status == 200 && $0.json == .object(["ok": .bool(true)]) })
        // No process id in a default answer.
        #expect(real.allSatisfy { $0.headers["x-gateway-pid"] == nil })

        // The private listener itself knows only the real secrets.
        let privateBase = try #require(apis.first?.split(separator: "/").first)
        let wrongSecret = Base64URL.encode(try SecureRandom.bytes(24))
        let answer = CurlClient.perform(
            CurlRequest(url: "http://\(privateBase)/\(wrongSecret)/2018-06-01/runtime/invocation/next"),
            timeoutMilliseconds: 10_000)
        #expect((try? answer.get().status) == 404)
    }

    @Test("the Runtime API listener: a stranger's 404 at its head, body unread; a worker's wrong routes refused")
    func runtimeAPIListenerRefusals() throws {
        let server = try GatewayServeTests.server("warm", arguments: ["--warm-workers", "1"])
        var apis: [String] = []
        for _ in 0..<100 where apis.isEmpty {
            apis = try Self.workerRuntimeAPIs(gateway: server.pid)
            if apis.isEmpty { Thread.sleep(forTimeInterval: 0.05) }
        }
        let api = try #require(apis.first)
        let parts = api.split(separator: "/", maxSplits: 1).map(String.init)
        let port = try #require(parts.first?.split(separator: ":").last.flatMap { Int($0) })
        let secret = try #require(parts.last)
        let wrongSecret = Base64URL.encode(try SecureRandom.bytes(24))
        /// A connection to the listener that has sent a `POST` to `path` with `rest` after its first header.
        func posting(_ path: String, _ rest: String) throws -> RawConnection {
            let connection = try RawConnection(port: port)
            #expect(connection.send("POST \(path) HTTP/1.1\r\nHost: a\r\n" + rest))
            return connection
        }

        // A stranger announcing 100 MB gets its answer without sending a byte of it, and the connection ends.
        let stranger = try posting(
            "/\(wrongSecret)/2018-06-01/runtime/invocation/x/response", "Content-Length: 100000000\r\n\r\n")
        defer { stranger.close() }
        let refused = stranger.receive(for: 5)
        #expect(refused.text.hasPrefix("HTTP/1.1 404"))
        #expect(refused.closed)

        // The worker's own secret, on what is not a route for it (never its `next` or `init/error`: those are the
        // worker's). An unknown request id is a 400, as from Lambda.
        let unknownID = UUID().uuidString.lowercased()
        let cases: [(method: String, path: String, status: Int)] = [
            ("POST", "invocation/next", 404), ("GET", "invocation/\(unknownID)/response", 404),
            ("GET", "init/error", 404), ("POST", "invocation//response", 404), ("GET", "invocation", 404),
            ("POST", "invocation/\(unknownID)/response/more", 404), ("PUT", "invocation/\(unknownID)/error", 404),
            ("POST", "invocation/\(unknownID)/response", 400), ("POST", "invocation/\(unknownID)/error", 400),
        ]
        for (method, path, status) in cases {
            let answer = try CurlClient.perform(
                CurlRequest(
                    method: method, url: "http://127.0.0.1:\(port)/\(secret)/2018-06-01/runtime/\(path)",
                    headers: [("content-type", "application/json")], body: method == "GET" ? [] : Array("{}".utf8)),
                timeoutMilliseconds: 10_000
            ).get()
            #expect(answer.status == status, "\(method) \(path)")
        }

        // A client that asks before sending its body (curl does past 1 MB) is told to go on, then answered.
        let answerPath = "/\(secret)/2018-06-01/runtime/invocation/\(unknownID)/response"
        let asking = try posting(answerPath, "Expect: 100-continue\r\nContent-Length: 2\r\n\r\n")
        defer { asking.close() }
        #expect(asking.receive(for: 1).text.hasPrefix("HTTP/1.1 100 Continue\r\n"))
        #expect(asking.send("{}"))
        #expect(asking.receive(for: 1).text.hasPrefix("HTTP/1.1 400"))

        // A head of more fields than a worker ever sends: refused before it is routed.
        let fields = (0..<100).map { "x-field-\($0): \($0)\r\n" }.joined()
        let crowded = try posting(answerPath, fields + "Content-Length: 2\r\n\r\n{}")
        defer { crowded.close() }
        let crowdedAnswer = crowded.receive(for: 5)
        #expect(crowdedAnswer.text.hasPrefix("HTTP/1.1 400"))
        #expect(crowdedAnswer.closed)

        // The worker still serves.
        let caregiver = try caregiverToken(UUID())
        let register = try server.post(
            "/api/push/register", bearer: caregiver,
            body: ["token": .string(makeDeviceToken()), "platform": .string("ios"), "environment": .string("DEV")])
        #expect(register.status == 200)
    }

    @Test("warm: an answer past 6 MB fails its invocation as Function.ResponseSizeTooLarge; the worker is told 413")
    func oversizedAnswer() throws {
        let scripts = try ScriptFunctions.make([
            "verbose": .init(
                body: """
                    head -c 6291457 /dev/zero | tr '\\0' 'a' > "$TMPDIR_SCRIPT/big"
                    while true; do
                      \(ScriptFunctions.next)
                      id=$(grep -i '^lambda-runtime-aws-request-id:' "$TMPDIR_SCRIPT/headers" | cut -d' ' -f2 | tr -d '\\r')
                      code=$(curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary @"$TMPDIR_SCRIPT/big" \\
                        "http://$AWS_LAMBDA_RUNTIME_API/2018-06-01/runtime/invocation/$id/response")
                      echo "the runtime answered $code" >&2
                    done
                    """,
                timeoutSeconds: 30, concurrency: 1)
        ])
        let server = try RunnerServer(
            arguments: ["--mode", "warm", "--warm-workers", "1"] + scripts.arguments, environment: testEnvironment())
        for _ in 0..<2 {
            let answer = try server.request(
                "POST", "/test/verbose", headers: ["content-type": "application/json"], body: "{}")
            #expect(answer.status == 502 && answer.json?["type"] == .string("/problems/bad-gateway"))
        }
        #expect(server.logs("the runtime answered 413"))
        // The invocation failed for what it was (Lambda's error type), not for asking for more without an answer.
        #expect(server.logs("the function reported Function.ResponseSizeTooLarge"))
        #expect(!server.logs("without a response", within: 0))
        // One worker served both: it was told, not killed.
        #expect(!server.logs("warm worker replaced", within: 0))
    }

    // MARK: Invocations bounded like Lambda's

    @Test("warm: post-response work past the timeout kills the worker; the next request gets a new one")
    func postResponseWorkIsBounded() throws {
        let scripts = try ScriptFunctions.make([
            "lingering": .init(
                body: """
                    while true; do \(ScriptFunctions.next); reply '{"statusCode":200,"body":"answered"}'; sleep 30; done
                    """,
                timeoutSeconds: 2, concurrency: 1)
        ])
        let server = try RunnerServer(
            arguments: ["--mode", "warm", "--warm-workers", "1", "--debug-headers", "--queue-timeout-ms", "20000"]
                + scripts.arguments,
            environment: testEnvironment())
        let first = try server.request(
            "POST", "/test/lingering", headers: ["content-type": "application/json"], body: "{}")
        #expect(first.status == 200)
        let firstPID = try #require(first.headers["x-gateway-pid"].flatMap(Int32.init))
        // The worker is still sleeping in its post-response work; the next event must wait for its replacement.
        let second = try server.request(
            "POST", "/test/lingering", headers: ["content-type": "application/json"], body: "{}")
        #expect(second.status == 200)
        let secondPID = try #require(second.headers["x-gateway-pid"].flatMap(Int32.init))
        #expect(secondPID != firstPID)
        #expect(kill(firstPID, 0) != 0)
        #expect(server.logs("post-response work exceeded the timeout"))
    }

    @Test(
        "a function over its memory size dies and gets a 502; with room it answers; the host goes on",
        arguments: GatewayServeTests.modes)
    func memoryLimit(mode: String) throws {
        // Python allocating 256 MiB at once: a MemoryError (and the process's end) under a 64 MB limit, nothing
        // under 1024 MB. Warm, the Python process is the worker itself, so its death is the worker's.
        let worker = """
            import os, urllib.request
            api = "http://" + os.environ["AWS_LAMBDA_RUNTIME_API"] + "/2018-06-01/runtime/invocation/"
            while True:
                with urllib.request.urlopen(api + "next") as event:
                    request_id = event.headers["Lambda-Runtime-Aws-Request-Id"]
                    event.read()
                food = bytearray(256 * 1024 * 1024)
                answer = urllib.request.Request(
                    api + request_id + "/response", data=b'{"statusCode":200,"body":"fed"}', method="POST")
                urllib.request.urlopen(answer).read()
            """
        let once = """
            import sys
            sys.stdin.read()
            food = bytearray(256 * 1024 * 1024)
            print('{"statusCode":200,"body":"fed"}')
            """
        let body = """
            if [ -n "$AWS_LAMBDA_RUNTIME_API" ]; then
              exec python3 - <<'PY'
            \(worker)
            PY
            fi
            exec python3 -c "$(cat <<'PY'
            \(once)
            PY
            )"
            """
        let scripts = try ScriptFunctions.make([
            "hungry": .init(body: body, timeoutSeconds: 10, memoryMB: 64),
            "fed": .init(body: body, timeoutSeconds: 10, memoryMB: 1024),
        ])
        let server = try RunnerServer(
            arguments: ["--mode", mode, "--warm-workers", "1"] + scripts.arguments, environment: testEnvironment())
        for _ in 0..<2 {
            let hungry = try server.request(
                "POST", "/test/hungry", headers: ["content-type": "application/json"], body: "{}")
            #expect(hungry.status == 502 && hungry.json?["type"] == .string("/problems/bad-gateway"))
            let fed = try server.request("POST", "/test/fed", headers: ["content-type": "application/json"], body: "{}")
            #expect(fed.status == 200 && String(decoding: fed.body, as: UTF8.self) == "fed")
        }
    }

    // MARK: Hostile HTTP on the public port

    static func limitedServer(_ extra: [String] = []) throws -> RunnerServer {
        try RunnerServer(
            arguments: [
                "--mode", "cold", "--max-header-bytes", "4096", "--max-header-count", "20", "--header-timeout-ms",
                "500",
                "--body-timeout-ms", "500", "--idle-timeout-ms", "1000",
            ] + extra,
            environment: testEnvironment())
    }

    @Test("a header block over the size or count limit is a 431 problem, and the connection closes")
    func oversizedHeaders() throws {
        let server = try Self.limitedServer()
        let big = try RawConnection(port: server.port)
        big.send("GET /api/nothing HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "a", count: 5000))\r\n\r\n")
        let bigAnswer = big.receive(for: 15)
        #expect(bigAnswer.text.hasPrefix("HTTP/1.1 431 "))
        #expect(bigAnswer.text.contains("/problems/request-header-fields-too-large"))
        #expect(bigAnswer.closed)

        let many = try RawConnection(port: server.port)
        let fields = (0..<30).map { "X-Field-\($0): v\r\n" }.joined()
        many.send("GET /api/nothing HTTP/1.1\r\nHost: x\r\n\(fields)\r\n")
        let manyAnswer = many.receive(for: 15)
        #expect(manyAnswer.text.hasPrefix("HTTP/1.1 431 "))
        #expect(manyAnswer.closed)

        // Just under both limits is served.
        let fine = try RawConnection(port: server.port)
        let few = (0..<10).map { "X-Field-\($0): v\r\n" }.joined()
        fine.send("GET /api/nothing HTTP/1.1\r\nHost: x\r\n\(few)\r\n")
        #expect(fine.status(within: 15) == 404)
        #expect(server.logs(#""http.limit":"header_size""#))
        #expect(server.logs(#""http.limit":"header_count""#))
    }

    @Test("a client too slow with its headers or its body gets a 408 and is cut off")
    func slowClients() throws {
        let server = try Self.limitedServer()
        let head = "POST /api/push/register HTTP/1.1\r\nHost: x\r\n"
        // Headers that stop half-way, and a body that stops after 1 of its 100 bytes.
        for partial in [head, head + "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"] {
            let connection = try RawConnection(port: server.port)
            connection.send(partial)
            let answer = connection.receive(for: 15)
            #expect(answer.text.hasPrefix("HTTP/1.1 408 "))
            #expect(answer.text.contains("/problems/request-timeout"))
            #expect(answer.closed)
        }
        #expect(server.logs(#""http.limit":"header_timeout""#))
        #expect(server.logs(#""http.limit":"body_timeout""#))
    }

    @Test("an idle keep-alive connection is closed after the idle timeout")
    func idleConnections() throws {
        let server = try Self.limitedServer()
        let connection = try RawConnection(port: server.port)
        connection.send("GET /api/nothing HTTP/1.1\r\nHost: x\r\n\r\n")
        let answer = connection.receive(for: 15)
        #expect(answer.text.hasPrefix("HTTP/1.1 404 "))
        #expect(answer.closed)
        // A connection that never sends anything is closed too.
        let silent = try RawConnection(port: server.port)
        let nothing = silent.receive(for: 15)
        #expect(nothing.text.isEmpty && nothing.closed)
        #expect(server.logs(#""http.limit":"idle_timeout""#))
    }

    @Test("past the connection cap a new connection gets a 503 problem; the connections being served are not disturbed")
    func connectionCap() throws {
        let server = try RunnerServer(
            arguments: ["--mode", "cold", "--max-connections", "4", "--idle-timeout-ms", "60000"],
            environment: testEnvironment())
        let served = try (0..<4).map { _ in try RawConnection(port: server.port) }
        // Each of them is answered (so each is known to be accepted and counted) and stays open.
        for connection in served {
            connection.send("GET /api/nothing HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(connection.status(within: 15) == 404)
        }
        let extra = try RawConnection(port: server.port)
        extra.send("GET /api/nothing HTTP/1.1\r\nHost: x\r\n\r\n")
        let refused = extra.receive(for: 15)
        #expect(refused.text.hasPrefix("HTTP/1.1 503 "))
        #expect(refused.text.lowercased().contains("retry-after: 1"))
        #expect(refused.closed)
        // The served connections still work.
        served[0].send("GET /api/still-here HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let again = served[0].receive(for: 15)
        #expect(again.text.contains("/problems/not-found") && again.text.contains("still-here"))
        #expect(server.logs(#""http.limit":"max_connections""#))
        // Once a served connection closes, a new one is accepted again.
        served[1].close()
        var admitted = false
        for _ in 0..<50 where !admitted {
            let next = try RawConnection(port: server.port)
            next.send("GET /api/nothing HTTP/1.1\r\nHost: x\r\n\r\n")
            admitted = next.status(within: 15) == 404
            if !admitted { Thread.sleep(forTimeInterval: 0.1) }
        }
        #expect(admitted)
    }
}

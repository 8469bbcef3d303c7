import Codecs
import Curl
import JOSE
import FunctionRuntime
import ProcessSupervision
import TestSupport
import CaregiverPush
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `push-register` latency three ways in one run: the built function on stdin/stdout directly, through
/// `runner serve --mode cold`, and through `runner serve --mode warm`.
struct RunnerBenchmark {
    struct Row {
        let path: String
        let medianMilliseconds: Double
        /// Over the timed requests, per request: CPU ms of the runner's own process (the gateway: HTTP, the event,
        /// the worker's Runtime API) and of its child processes (the function's workers); `nil` where not read.
        var gatewayCPUMilliseconds: Double? = nil
        var workersCPUMilliseconds: Double? = nil
    }

    /// Where `runner` is (it starts the functions beside it).
    let binDirectory: URL
    /// Where the directly invoked `push-register` is (the shipped artifact under `make bench`).
    let functionDirectory: URL
    let environment: [String: String]
    let requests: Int

    func run() throws -> [Row] {
        let caregiver = UUID()
        let token = try JWTSigner.sign(
            claims: [
                "sub": .string(caregiver.uuidString.lowercased()), "aud": .string("authenticated"),
                "role": .string("authenticated"), "exp": .number(Date().timeIntervalSince1970 + 3600),
            ],
            using: .hmac(secret: Array((environment["SUPABASE_JWT_SECRET"] ?? "").utf8)))
        let body = #"{"token":"bench-runner-device","platform":"ios","environment":"DEV"}"#
        var rows: [Row] = []

        let event = APIGatewayV2Request(
            routeKey: "POST /api/push/register", rawPath: "/api/push/register",
            headers: ["authorization": "Bearer \(token)", "content-type": "application/json"],
            requestContext: .init(requestId: "bench", http: .init(method: "POST", path: "/api/push/register")),
            body: body)
        let input = try JSONEncoder().encode(event)
        // Timed to stdout's EOF, as the runner answers: Foundation's Process reaps exits on a ~50 ms poll, which
        // would otherwise swamp the function's own time.
        var direct: [Double] = []
        for _ in 0..<requests {
            let start = ContinuousClock.now
            let result = try ChildProcess.run(
                executable: functionDirectory.appendingPathComponent("push-register"), environment: environment,
                input: input)
            guard result.exitStatus == 0 else { throw BenchmarkError("push-register exited \(result.exitStatus)") }
            let elapsed = result.standardOutputClosedAt - start
            direct.append(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
        }
        rows.append(Row(path: "stdin → push-register (no runner), to stdout EOF", medianMilliseconds: median(direct)))
        for mode in ["cold", "warm"] {
            let server = try Server(binDirectory: binDirectory, mode: mode, environment: environment)
            defer { server.stop() }
            let request = CurlRequest(
                method: "POST", url: "http://127.0.0.1:\(server.port)/api/push/register",
                headers: [("authorization", "Bearer \(token)"), ("content-type", "application/json")],
                body: Array(body.utf8))
            // A new connection per request (a client of its own each time), and, warm, one kept-alive connection for
            // every request, as a load balancer or API gateway calls its host.
            var paths: [(String, () throws -> CurlClient)] = [
                ("HTTP → runner serve --mode \(mode) → push-register", { try CurlClient(maxConnectionsPerHost: 1) })
            ]
            if mode == "warm" {
                let kept = try CurlClient(maxConnectionsPerHost: 1)
                paths.append(("HTTP, one kept-alive connection → runner serve --mode warm → push-register", { kept }))
            }
            for (path, client) in paths {
                // One untimed request: a warm pool's workers connect to the database on their first invocation.
                _ = try client().perform(request, timeoutMilliseconds: 30_000)
                let cpuStart = ProcessTreeCPU.tree(server.process.processIdentifier)
                let milliseconds = try measure {
                    guard case .success(let response) = try client().perform(request, timeoutMilliseconds: 30_000),
                        response.status == 200
                    else { throw BenchmarkError("\(path): no 200") }
                }
                let cpuEnd = ProcessTreeCPU.tree(server.process.processIdentifier)
                var row = Row(path: path, medianMilliseconds: milliseconds)
                if mode == "warm" {
                    // Cold mode's children exit per request: their CPU is gone from procfs before it can be read.
                    row.gatewayCPUMilliseconds = (cpuEnd.root - cpuStart.root) / Double(requests)
                    row.workersCPUMilliseconds = (cpuEnd.descendants - cpuStart.descendants) / Double(requests)
                }
                rows.append(row)
            }
            guard mode == "warm" else { continue }
            // The HTTP hop alone: the gateway's health check, no function, over a kept-alive connection.
            let health = CurlRequest(url: "http://127.0.0.1:\(server.port)/healthz")
            let kept = try CurlClient(maxConnectionsPerHost: 1)
            _ = kept.perform(health, timeoutMilliseconds: 30_000)
            let hop = try measure {
                guard case .success(let response) = kept.perform(health, timeoutMilliseconds: 30_000),
                    response.status == 200
                else { throw BenchmarkError("/healthz: no 200") }
            }
            rows.append(
                Row(
                    path: "HTTP, one kept-alive connection → `GET /healthz` (the HTTP hop, no function)",
                    medianMilliseconds: hop))
        }
        return rows
    }

    private func measure(_ body: () throws -> Void) throws -> Double {
        var samples: [Double] = []
        for _ in 0..<requests {
            let start = ContinuousClock.now
            try body()
            let elapsed = ContinuousClock.now - start
            samples.append(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
        }
        return median(samples)
    }

    /// A `runner serve` child process on a free port.
    final class Server {
        let process: Process
        let port: Int

        init(binDirectory: URL, mode: String, environment: [String: String]) throws {
            process = Process()
            process.executableURL = binDirectory.appendingPathComponent("runner")
            process.arguments = ["serve", "--port", "0", "--mode", mode, "--functions", "infra/functions.json"]
            process.environment = environment
            let stdout = Pipe()
            process.standardOutput = stdout
            process.standardError = FileHandle.nullDevice
            try process.run()
            var announced = Data()
            while !announced.contains(UInt8(ascii: "\n")) {
                let chunk = stdout.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                announced.append(chunk)
            }
            guard let port = (try? JSONValue.parse(Array(announced)))?["port"]?.integerValue else {
                throw BenchmarkError("runner serve did not start")
            }
            self.port = Int(port)
        }

        func stop() {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }
    }
}

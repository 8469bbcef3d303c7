import Codecs
import CaregiverPush
import Foundation
import Testing

/// The pre-signed S3 URL a CloudFormation custom resource answers to, on 127.0.0.1: a small Python HTTP server
/// that answers as S3 does for a pre-signed `PUT`.
///
/// - `PUT` with the signature's query and no or an empty `Content-Type` → `200` with an `ETag`, empty body.
/// - a `Content-Type` with a value → `403` `SignatureDoesNotMatch` (the URL was signed without one);
///   any other method → `405` `MethodNotAllowed`; no signature in the query → `403` `AccessDenied`.
/// - `failFirst` requests are answered `503` `SlowDown` first (S3's throttling answer).
///
/// Every request it receives is one JSON line in `requests.jsonl`: method, path, query, headers, body.
///
/// `@unchecked Sendable`: every stored property is a constant, and what it reports it reads from its files.
package final class PresignedURLFake: @unchecked Sendable {
    package let port: Int
    private let process: Process
    private let directory: URL

    /// `CUSTOM_RESOURCE_RESPONSE_ORIGIN` for this fake: db-migrate answers only CloudFormation's S3 hosts and this.
    package var origin: String { "http://127.0.0.1:\(port)" }

    /// When each request arrived (seconds since 1970, as the fake's clock read it), oldest first.
    package func arrivals() throws -> [Double] {
        let file = directory.appendingPathComponent("requests.jsonl")
        guard let text = try? String(contentsOf: file, encoding: .utf8) else { return [] }
        return try text.split(separator: "\n").map { try JSONValue.parse(String($0))["at"]?.numberValue ?? 0 }
    }

    /// A pre-signed-looking URL to this fake.
    package var responseURL: String {
        "http://127.0.0.1:\(port)/cloudformation-custom-resource-response-useast1/arn%3Aaws%3Acloudformation/stack?"
            + "AWSAccessKeyId=AKIAEXAMPLE&Expires=1764003600&Signature=c2lnbmF0dXJl"
    }

    package init(failFirst: Int = 0) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("s3-fake-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        (process, port) = try Self.startPython(Self.script, arguments: [directory.path, String(failFirst)])
    }

    deinit {
        process.terminate()
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }

    package enum FakeError: Error { case didNotStart }

    /// Starts `python3 -c script arguments…`, which prints the port it listens on as its first line; its output
    /// after that, and its errors, are discarded.
    static func startPython(_ script: String, arguments: [String]) throws -> (Process, Int) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script] + arguments
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        try process.run()
        let line = String(decoding: stdout.fileHandleForReading.availableLine(), as: UTF8.self)
        guard let port = Int(line.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            process.terminate()
            throw FakeError.didNotStart
        }
        return (process, port)
    }

    package struct Received {
        package let method: String
        package let query: String
        package let headers: [String: String]
        package let body: JSONValue?
        package let status: Int
    }

    /// The requests received so far, oldest first.
    package func requests() throws -> [Received] {
        let file = directory.appendingPathComponent("requests.jsonl")
        guard let text = try? String(contentsOf: file, encoding: .utf8) else { return [] }
        return try text.split(separator: "\n").map { line in
            let object = try JSONValue.parse(String(line))
            var headers: [String: String] = [:]
            for (name, value) in object["headers"]?.objectValue ?? [:] { headers[name] = value.stringValue }
            return Received(
                method: object["method"]?.stringValue ?? "", query: object["query"]?.stringValue ?? "",
                headers: headers, body: object["body"]?.stringValue.flatMap { try? JSONValue.parse($0) },
                status: Int(object["status"]?.numberValue ?? 0))
        }
    }

    private static let script = #"""
        import http.server, json, os, signal, sys, threading, time
        # Started from a test thread that blocks most signals; the mask is inherited: unblock, so SIGTERM ends it.
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        directory, fail_first = sys.argv[1], int(sys.argv[2])
        lock = threading.Lock()
        seen = [0]

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def answer(self, status, code=None):
                body = b"" if code is None else (
                    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code></Error>' % code).encode()
                self.send_response(status)
                if status == 200:
                    self.send_header("ETag", '"9b2cf535f27731c974343645a3985328"')
                if body:
                    self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return status

            def handle_any(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                path, _, query = self.path.partition("?")
                with lock:
                    seen[0] += 1
                    number = seen[0]
                if number <= fail_first:
                    status = self.answer(503, "SlowDown")
                elif self.command != "PUT":
                    status = self.answer(405, "MethodNotAllowed")
                elif "Signature=" not in query:
                    status = self.answer(403, "AccessDenied")
                elif self.headers.get("Content-Type"):
                    status = self.answer(403, "SignatureDoesNotMatch")
                else:
                    status = self.answer(200)
                record = {"method": self.command, "path": path, "query": query, "status": status, "at": time.time(),
                          "headers": {k.lower(): v for k, v in self.headers.items()},
                          "body": body.decode("utf-8", "replace")}
                with lock, open(os.path.join(directory, "requests.jsonl"), "a") as log:
                    log.write(json.dumps(record) + "\n")

            do_PUT = do_POST = do_GET = handle_any

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        print(server.server_address[1], flush=True)
        server.serve_forever()
        """#
}

extension FileHandle {
    /// Reads up to the first newline (or EOF).
    fileprivate func availableLine() -> Data {
        var line = Data()
        while let byte = try? read(upToCount: 1), let first = byte.first, first != UInt8(ascii: "\n") {
            line.append(first)
        }
        return line
    }
}

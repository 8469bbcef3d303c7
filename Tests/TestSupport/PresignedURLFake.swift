import Codecs
import CaregiverPush
import FCMEmulator
import Foundation
import Testing

/// The pre-signed S3 URL a CloudFormation custom resource answers to: CloudFormation's response bucket of
/// `us-east-1` (``responseURL``), as db-migrate reaches it when deployed there, stood in for by a small Python server
/// on 127.0.0.1 that answers as S3 does for a pre-signed `PUT`.
///
/// db-migrate sends its answer to CloudFormation's bucket only (`AWS_REGION`'s), over verified TLS. The fake is
/// reached through the configuration a process already honours (``environment``): it is the HTTPS proxy
/// (`https_proxy`, which libcurl follows), it opens each tunnel itself and answers at its far end under a certificate
/// for the bucket's host, from a throwaway authority the process trusts alone (`SSL_CERT_FILE`).
///
/// - `PUT` with the signature's query and no or an empty `Content-Type` → `200` with an `ETag`, empty body.
/// - a `Content-Type` with a value → `403` `SignatureDoesNotMatch` (the URL was signed without one);
///   any other method → `405` `MethodNotAllowed`; no signature in the query → `403` `AccessDenied`.
/// - `failFirst` requests are answered `503` `SlowDown` first (S3's throttling answer).
///
/// Every request it receives is one JSON line in `requests.jsonl`: the tunnel it came through, method, path, query,
/// headers, body.
///
/// `@unchecked Sendable`: every stored property is a constant, and what it reports it reads from its files.
package final class PresignedURLFake: @unchecked Sendable {
    /// CloudFormation's response bucket of `us-east-1`, on S3's global host.
    package static let bucketHost = "cloudformation-custom-resource-response-useast1.s3.amazonaws.com"

    package let port: Int
    private let process: Process
    private let directory: URL
    private let certificates: EmulatorCertificates

    /// What a process needs to reach this fake at ``responseURL``: the function's region, the fake as its HTTPS
    /// proxy, and the fake's authority as the only one it trusts.
    package var environment: [String: String] {
        ["AWS_REGION": "us-east-1", "https_proxy": "http://127.0.0.1:\(port)", "SSL_CERT_FILE": certificates.caFile]
    }

    /// When each request arrived (seconds since 1970, as the fake's clock read it), oldest first.
    package func arrivals() throws -> [Double] {
        let file = directory.appendingPathComponent("requests.jsonl")
        guard let text = try? String(contentsOf: file, encoding: .utf8) else { return [] }
        return try text.split(separator: "\n").map { try JSONValue.parse(String($0))["at"]?.numberValue ?? 0 }
    }

    /// A pre-signed-looking URL of CloudFormation's bucket, which this fake answers through ``environment``.
    package var responseURL: String {
        "https://\(Self.bucketHost)/arn%3Aaws%3Acloudformation%3Aus-east-1%3A123456789012%3Astack/caregiver-push-dev?"
            + "AWSAccessKeyId=AKIAEXAMPLE&Expires=1764003600&Signature=c2lnbmF0dXJl"
    }

    package init(failFirst: Int = 0) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("s3-fake-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        certificates = try EmulatorCertificates.make(
            in: directory.appendingPathComponent("tls").path, host: Self.bucketHost)
        (process, port) = try PythonServer.start(
            Self.script,
            arguments: [
                directory.path, String(failFirst), certificates.certificateFile, certificates.privateKeyFile,
            ])
    }

    deinit {
        process.terminate()
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }

    package struct Received {
        /// The tunnel it came through (`host:443`, as the client asked the proxy for it), or `nil`: sent to the
        /// proxy itself.
        package let tunnel: String?
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
                tunnel: object["tunnel"]?.stringValue, method: object["method"]?.stringValue ?? "",
                query: object["query"]?.stringValue ?? "",
                headers: headers, body: object["body"]?.stringValue.flatMap { try? JSONValue.parse($0) },
                status: Int(object["status"]?.numberValue ?? 0))
        }
    }

    private static let script = #"""
        import http.server, json, os, signal, ssl, sys, threading, time
        # Started from a test thread that blocks most signals; the mask is inherited: unblock, so SIGTERM ends it.
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        directory, fail_first, certificate, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(certificate, key)
        lock = threading.Lock()
        seen = [0]

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            tunnel = None

            def log_message(self, *args):
                pass

            def do_CONNECT(self):
                # The proxy's part: open the tunnel, then answer at its far end, over TLS, as the host it names.
                self.send_response(200, "Connection established")
                self.end_headers()
                self.close_connection = True
                try:
                    connection = tls.wrap_socket(self.connection, server_side=True)
                except (ssl.SSLError, OSError):
                    return
                try:
                    Tunnelled(connection, self.client_address, self.server, self.path)
                finally:
                    connection.close()

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
                          "tunnel": self.tunnel, "headers": {k.lower(): v for k, v in self.headers.items()},
                          "body": body.decode("utf-8", "replace")}
                with lock, open(os.path.join(directory, "requests.jsonl"), "a") as log:
                    log.write(json.dumps(record) + "\n")

            do_PUT = do_POST = do_GET = handle_any

        class Tunnelled(Handler):
            """The requests that come through one tunnel, decrypted."""

            def __init__(self, connection, address, server, tunnel):
                self.tunnel = tunnel
                super().__init__(connection, address, server)

            def do_CONNECT(self):
                self.answer(405, "MethodNotAllowed")

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        print(server.server_address[1], flush=True)
        server.serve_forever()
        """#
}

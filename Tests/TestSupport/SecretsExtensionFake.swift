import Codecs
import Foundation
import Testing

/// The AWS Parameters and Secrets Lambda Extension on 127.0.0.1, answering as the extension does
/// (docs/deploy.md, "Secrets"): a small Python HTTP server in front of a JSON file that plays Secrets Manager.
///
/// - `GET /secretsmanager/get?secretId=<id>` with `X-Aws-Parameters-Secrets-Token: <session token>` → `200` with the
///   `GetSecretValue` document (`ARN`, `Name`, `VersionId`, `SecretString`, `VersionStages`, `CreatedDate`).
/// - the header missing or not the session token → `401`, no secret.
/// - an id Secrets Manager does not know → `400` with `{"__type":"ResourceNotFoundException",…}`, as the extension
///   passes Secrets Manager's error on.
/// - during its first `notReadySeconds` → `400` "not ready to serve traffic, please wait" (the extension starting
///   alongside the function).
/// - each value is cached for `ttlSeconds` (the extension's `SECRETS_MANAGER_TTL`): a value rotated in the store is
///   answered once the cached entry expires, and not before.
///
/// Every request is one JSON line in `requests.jsonl` (path, query, whether the token matched, status).
package final class SecretsExtensionFake {
    package let port: Int
    package let sessionToken: String
    private let process: Process
    private let directory: URL

    package init(secrets: [String: String], ttlSeconds: Double = 300, notReadySeconds: Double = 0) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("secrets-fake-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        sessionToken = "IQoJb3JpZ2luX2VjE" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        try Self.write(secrets, to: directory)
        (process, port) = try PythonServer.start(
            Self.script, arguments: [directory.path, sessionToken, String(ttlSeconds), String(notReadySeconds)])
    }

    deinit {
        process.terminate()
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }

    package enum FakeError: Error { case didNotStart }

    /// Puts new values in the store (Secrets Manager): a rotation. The extension answers them once its cache expires.
    package func store(_ secrets: [String: String]) throws {
        try Self.write(secrets, to: directory)
    }

    private static func write(_ secrets: [String: String], to directory: URL) throws {
        let data = try JSONSerialization.data(withJSONObject: secrets)
        let file = directory.appendingPathComponent("store.json")
        let temporary = directory.appendingPathComponent("store.json.tmp")
        try data.write(to: temporary)
        // rename(2): the fake reads either the old store or the new one, never half of one.
        guard rename(temporary.path, file.path) == 0 else { throw FakeError.didNotStart }
    }

    /// The environment a function on Lambda would have for this extension.
    package var environment: [String: String] {
        ["AWS_SESSION_TOKEN": sessionToken, "PARAMETERS_SECRETS_EXTENSION_HTTP_PORT": String(port)]
    }

    package struct Received {
        package let query: String
        package let tokenMatched: Bool
        package let status: Int
    }

    package func requests() throws -> [Received] {
        let file = directory.appendingPathComponent("requests.jsonl")
        guard let text = try? String(contentsOf: file, encoding: .utf8) else { return [] }
        return try text.split(separator: "\n").map { line in
            let object = try JSONValue.parse(String(line))
            return Received(
                query: object["query"]?.stringValue ?? "", tokenMatched: object["tokenMatched"] == .bool(true),
                status: Int(object["status"]?.numberValue ?? 0))
        }
    }

    private static let script = #"""
        import http.server, json, os, signal, sys, threading, time, urllib.parse, uuid
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        directory, token, ttl, not_ready = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
        started = time.monotonic()
        lock = threading.Lock()
        cache = {}  # secret id -> (fetched at, GetSecretValue document)

        def get_secret_value(secret_id):
            """Secrets Manager: the store's current value, with a version id per distinct value."""
            with open(os.path.join(directory, "store.json")) as store:
                values = json.load(store)
            if secret_id not in values:
                return None
            value = values[secret_id]
            name = secret_id.rsplit(":", 1)[-1] if secret_id.startswith("arn:") else secret_id
            return {"ARN": secret_id if secret_id.startswith("arn:") else
                        "arn:aws:secretsmanager:us-east-1:123456789012:secret:" + name,
                    "Name": name, "VersionId": str(uuid.uuid5(uuid.NAMESPACE_OID, value)),
                    "SecretString": value, "VersionStages": ["AWSCURRENT"],
                    "CreatedDate": "2026-11-25T00:00:00.000Z", "ResultMetadata": {}}

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def answer(self, status, body, content_type="application/json"):
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return status

            def do_GET(self):
                path, _, query = self.path.partition("?")
                matched = self.headers.get("X-Aws-Parameters-Secrets-Token") == token
                secret_id = urllib.parse.parse_qs(query).get("secretId", [None])[0]
                if time.monotonic() - started < not_ready:
                    status = self.answer(400, "not ready to serve traffic, please wait", "text/plain")
                elif path != "/secretsmanager/get":
                    status = self.answer(404, "not found", "text/plain")
                elif not matched:
                    status = self.answer(401, "Unauthorized", "text/plain")
                elif not secret_id:
                    status = self.answer(400, json.dumps({"__type": "InvalidParameterException",
                                                          "message": "secretId is required"}))
                else:
                    with lock:
                        entry = cache.get(secret_id)
                        if entry is None or time.monotonic() - entry[0] >= ttl:
                            document = get_secret_value(secret_id)
                            entry = None if document is None else (time.monotonic(), document)
                            if entry is not None:
                                cache[secret_id] = entry
                    if entry is None:
                        status = self.answer(400, json.dumps({
                            "__type": "ResourceNotFoundException",
                            "message": "Secrets Manager can't find the specified secret."}))
                    else:
                        status = self.answer(200, json.dumps(entry[1]))
                record = {"path": path, "query": query, "tokenMatched": matched, "status": status}
                with lock, open(os.path.join(directory, "requests.jsonl"), "a") as log:
                    log.write(json.dumps(record) + "\n")

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        print(server.server_address[1], flush=True)
        server.serve_forever()
        """#
}

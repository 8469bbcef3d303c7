import Codecs
import Curl
import OpenSSLCrypto
import CaregiverPush
import FCMEmulator
import Foundation
import TestFixtures
import Testing

/// A running `runner fcm-emulator` process: the fake Google at the network edge, on 127.0.0.1 — plain HTTP/1.1, or
/// TLS with ALPN h2 under its own throwaway CA (`tls: true`), as `fcm.googleapis.com` serves.
///
/// Each instance has its own throwaway service-account key and client email, so the shared access-token cache in
/// the database (keyed by client email) is its own too, and tests running in parallel do not see each other's mints.
package final class FCMFake {
    package let port: Int
    package let clientEmail: String
    /// The key file the functions get (base64 in `FCM_SERVICE_ACCOUNT_JSON`).
    package let serviceAccountJSON: String
    /// The throwaway CA's certificate in TLS mode: the functions get it as `SSL_CERT_FILE`.
    package let caFile: String?
    private let process: Process
    private let directory: URL

    package var baseURL: String { "\(caFile == nil ? "http" : "https")://127.0.0.1:\(port)" }
    /// What this test process trusts when it talks to the fake itself.
    package var trust: TrustStore { caFile.map(TrustStore.init(caFile:)) ?? .process }

    package init(delayMilliseconds: Int = 0, tls: Bool = false) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("fcm-fake-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let key = try PrivateKey.generateRSA()
        let projectID = "demo-project"
        clientEmail = "push-\(UUID().uuidString.prefix(8).lowercased())@demo-project.iam.gserviceaccount.com"
        let keyID = UUID().uuidString.lowercased()
        let bootstrapFile = directory.appendingPathComponent("service-account.json")
        let pem = try key.pemPKCS8()
        try ServiceAccountKeyFile.json(
            projectID: projectID, clientEmail: clientEmail, privateKeyID: keyID, privateKeyPEM: pem,
            tokenURI: "http://127.0.0.1/token"
        ).write(to: bootstrapFile, atomically: true, encoding: .utf8)

        let process = Process()
        process.executableURL = Executables.binDirectory.appendingPathComponent("runner")
        process.arguments =
            [
                "fcm-emulator", "--service-account", bootstrapFile.path, "--port", "0", "--delay-ms",
                "\(delayMilliseconds)",
            ] + (tls ? ["--tls", "--tls-directory", directory.appendingPathComponent("tls").path] : [])
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        guard let announcement = announcedLine(stdout), let port = announcement["port"]?.integerValue.map(Int.init),
            let tokenURL = announcement["tokenURL"]?.stringValue
        else {
            process.terminate()
            throw FakeError.didNotStart
        }
        self.port = port
        caFile = announcement["caFile"]?.stringValue
        serviceAccountJSON = ServiceAccountKeyFile.json(
            projectID: projectID, clientEmail: clientEmail, privateKeyID: keyID, privateKeyPEM: pem,
            tokenURI: tokenURL)
    }

    deinit {
        process.terminate()
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }

    package enum FakeError: Error { case didNotStart, badAnswer }

    /// The function environment pointing at this fake.
    package func environment(_ overrides: [String: String?] = [:]) -> [String: String] {
        var base: [String: String?] = [
            "FCM_SERVICE_ACCOUNT_JSON": Data(serviceAccountJSON.utf8).base64EncodedString(),
            "FCM_API_BASE_URL": baseURL,
            "SSL_CERT_FILE": caFile,
        ]
        for (key, value) in overrides { base[key] = value }
        return testEnvironment(base)
    }

    package func configuration(_ overrides: [String: String?] = [:]) -> Configuration {
        Configuration(environment: environment(overrides))
    }

    /// Every `messages:send` received (any answer), oldest first.
    package func requests() throws -> [JSONValue] {
        try get("/_emulator/fcm/requests")["requests"]?.arrayValue ?? []
    }

    /// The delivered messages (answered 200), oldest first.
    package func messages() throws -> [JSONValue] {
        try get("/_emulator/fcm/messages")["messages"]?.arrayValue ?? []
    }

    /// Delivered messages addressed to one of `tokens`.
    package func messages(to tokens: Set<String>) throws -> [JSONValue] {
        try messages().filter { tokens.contains($0["token"]?.stringValue ?? "") }
    }

    package var mints: Int {
        get throws { Int(try get("/_emulator/fcm/stats")["mints"]?.integerValue ?? -1) }
    }

    /// `/_emulator/fcm/stats`: `connections` (that carried sends; over TLS, handshakes), `maxConcurrentStreams`,
    /// `http2Requests`, `requests`, `delivered`, `mints`, `tls`.
    package func stats() throws -> JSONValue {
        try get("/_emulator/fcm/stats")
    }

    package func configure(delayMilliseconds: Int? = nil, revokeAccessTokens: Bool = false) throws {
        var body: [String: JSONValue] = ["revokeAccessTokens": .bool(revokeAccessTokens)]
        if let delayMilliseconds { body["delayMs"] = .number(Double(delayMilliseconds)) }
        let request = CurlRequest(
            method: "POST", url: baseURL + "/_emulator/fcm/config", headers: [("Content-Type", "application/json")],
            body: Array(json(body).utf8), trust: trust)
        guard case .success(let response) = CurlClient.perform(request, timeoutMilliseconds: 5000),
            response.status == 200
        else { throw FakeError.badAnswer }
    }

    private func get(_ path: String) throws -> JSONValue {
        guard
            case .success(let response) = CurlClient.perform(
                CurlRequest(url: baseURL + path, trust: trust), timeoutMilliseconds: 5000),
            response.status == 200
        else { throw FakeError.badAnswer }
        return try JSONValue.parse(response.body)
    }
}

import Codecs
import OpenSSLCrypto
import JOSE
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// A local stand-in for Google's OAuth token endpoint and FCM HTTP v1 `messages:send`, answering exactly as
/// Google does (docs/development.md, "The FCM emulator"), keeping what it received, and listing it over HTTP.
///
/// - `POST /token` — verifies the service-account assertion (RS256 signature against the key's public half, `kid`,
///   `iss`, `scope`, `aud`, `iat`/`exp`) and issues an access token.
/// - `POST /v1/projects/{project}/messages:send` — checks the bearer token and the message, answers per
///   ``FCMErrorScenario``, after the configured delay.
/// - `GET /_emulator/fcm/messages` (delivered), `GET /_emulator/fcm/requests` (all), `GET /_emulator/fcm/stats`,
///   `POST /_emulator/fcm/config` (`{"delayMs": n, "revokeAccessTokens": true}`), `POST /_emulator/fcm/reset`.
public struct FCMEmulator: Sendable {
    /// Who the emulator accepts assertions from: the public half of a service-account key.
    public struct Account: Sendable {
        public let projectID: String
        public let clientEmail: String
        public let privateKeyID: String
        public let publicKeyPEM: String

        public init(projectID: String, clientEmail: String, privateKeyID: String, publicKeyPEM: String) {
            self.projectID = projectID
            self.clientEmail = clientEmail
            self.privateKeyID = privateKeyID
            self.publicKeyPEM = publicKeyPEM
        }
    }

    static let accessTokenLifetime: TimeInterval = 3599
    /// The scopes `messages:send` accepts (FCM's REST reference: "one of the following OAuth scopes"). Ours asks for
    /// `firebase.messaging` alone; the Python Admin SDK asks for `cloud-platform` (among others) and not
    /// `firebase.messaging`. Either must get a token, or the emulator would refuse Google's own SDK.
    static let sendScopes: Set<String> = [
        "https://www.googleapis.com/auth/firebase.messaging", "https://www.googleapis.com/auth/cloud-platform",
    ]
    /// Google's token endpoint, which google-auth (under the Python Admin SDK) always names as the assertion's `aud`
    /// whatever the key file's `token_uri`, while it posts to `token_uri`. Google accepts it, so the emulator does,
    /// beside its own URL (which is what ours names: the key file's `token_uri`).
    static let googleTokenURL = "https://oauth2.googleapis.com/token"
    static let payloadLimit = 4096

    public let account: Account
    public let state: FCMEmulatorState

    public init(account: Account, state: FCMEmulatorState = FCMEmulatorState()) {
        self.account = account
        self.state = state
    }

    /// Adds the emulator's routes to a router (its own server, or the runner's).
    /// - Parameter jwksRoutes: also the fake Supabase JWKS endpoint (``SupabaseJWKSRoutes``), whose control routes
    ///   replace the signing keys the functions trust: only ever on a loopback listener (`runner dev`'s emulator
    ///   port, `runner fcm-emulator` on 127.0.0.1), never on a public port.
    public func addRoutes<Context: RequestContext>(to router: Router<Context>, jwksRoutes: Bool) {
        router.post("/token") { request, _ in try await self.token(request) }
        router.post("/v1/projects/{project}/messages:send") { request, context in
            let connection = await self.connection(of: context)
            if let connection { await self.state.streamStarted(on: connection) }
            do {
                let response = try await self.send(
                    request, project: context.parameters.get("project") ?? "", connection: connection)
                if let connection { await self.state.streamEnded(on: connection) }
                return response
            } catch {
                if let connection { await self.state.streamEnded(on: connection) }
                throw error
            }
        }
        // What Google received (full device tokens, patients' names) and the emulator's behaviour: the developer's
        // only, never a page they visit (``LocalControl``).
        router.get("/_emulator/fcm/messages") { request, context in
            try LocalControl.check(request, context)
            return await self.listMessages(deliveredOnly: true)
        }
        router.get("/_emulator/fcm/requests") { request, context in
            try LocalControl.check(request, context)
            return await self.listMessages(deliveredOnly: false)
        }
        router.get("/_emulator/fcm/stats") { request, context in
            try LocalControl.check(request, context)
            return await self.stats()
        }
        router.post("/_emulator/fcm/config") { request, context in
            try LocalControl.check(request, context)
            return try await self.configure(request)
        }
        router.post("/_emulator/fcm/reset") { request, context in
            try LocalControl.check(request, context)
            await self.state.reset()
            return Self.json(200, .object(["ok": .bool(true)]))
        }
        if jwksRoutes { SupabaseJWKSRoutes.add(to: router) }
    }

    /// Whether `host` is a loopback address: only there may the JWKS control routes be served.
    public static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
    }

    /// Records the address the server listens on: the assertion's `aud` must name its `/token`.
    public func bound(host: String, port: Int) async {
        await bound(tokenURL: "http://\(host):\(port)/token")
    }

    /// Records the token URL the assertion's `aud` must name (`https://…` on a TLS port).
    public func bound(tokenURL: String) async {
        await state.bound(tokenURL: tokenURL)
    }

    /// The connection a request came on, when the router's context carries its channel: an HTTP/2 stream's parent
    /// (the TLS connection it multiplexes on), or the HTTP/1.1 connection itself.
    private func connection<Context: RequestContext>(of context: Context) async -> FCMEmulatorState.Connection? {
        guard let channel = (context as? any ConnectionCarryingContext)?.channel else { return nil }
        // An accepted connection's parent is the listening socket, which has none; an HTTP/2 stream's parent is the
        // connection. (Asking a plain socket for an HTTP/2 option would trap, so the shape of the tree decides.)
        if let connection = channel.parent, connection.parent != nil {
            return await state.connection(for: connection, http2: true)
        }
        return await state.connection(for: channel, http2: false)
    }

    // MARK: OAuth

    private func token(_ request: Request) async throws -> Response {
        var request = request
        let body = String(buffer: try await request.collectBody(upTo: 64 * 1024))
        let form = Self.parseForm(body)
        guard form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" else {
            return Self.oauthError("unsupported_grant_type", "Invalid grant_type: \(form["grant_type"] ?? "")")
        }
        guard let assertion = form["assertion"] else {
            return Self.oauthError("invalid_request", "Missing required parameter: assertion")
        }
        if let problem = await verifyAssertion(assertion) { return Self.oauthError("invalid_grant", problem) }
        let token = await state.issueAccessToken(lifetime: Self.accessTokenLifetime)
        return Self.json(
            200,
            .object([
                "access_token": .string(token), "expires_in": .number(Self.accessTokenLifetime),
                "token_type": .string("Bearer"),
            ]))
    }

    /// `nil` when the assertion is one Google would accept, else Google's `error_description`.
    func verifyAssertion(_ assertion: String) async -> String? {
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]),
            let claimBytes = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2]), let header = try? JSONValue.parse(headerBytes),
            let claims = try? JSONValue.parse(claimBytes)
        else { return "Invalid JWT: Token must be a short-lived token and in a reasonable timeframe" }
        guard header["alg"] == .string("RS256"), header["kid"] == .string(account.privateKeyID) else {
            return "Invalid JWT Signature."
        }
        guard let publicKey = try? PublicKey(pem: account.publicKeyPEM),
            publicKey.verify(signature: signature, message: Array("\(parts[0]).\(parts[1])".utf8), algorithm: .rs256)
        else { return "Invalid JWT Signature." }
        guard claims["iss"] == .string(account.clientEmail) else { return "Invalid JWT: iss does not match" }
        guard let scopes = claims["scope"]?.stringValue?.split(separator: " "),
            scopes.contains(where: { Self.sendScopes.contains(String($0)) })
        else { return "Invalid JWT: scope does not include firebase.messaging or cloud-platform" }
        if let tokenURL = await state.tokenURL, claims["aud"] != .string(tokenURL),
            claims["aud"] != .string(Self.googleTokenURL)
        {
            return "Invalid JWT: aud does not match \(tokenURL)"
        }
        let now = Date().timeIntervalSince1970
        guard let issuedAt = claims["iat"]?.numberValue, let expiry = claims["exp"]?.numberValue,
            expiry > issuedAt, expiry - issuedAt <= 3600, issuedAt <= now + 60, expiry > now
        else {
            return
                "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."
        }
        return nil
    }

    // MARK: messages:send

    private func send(
        _ request: Request, project: String, connection: FCMEmulatorState.Connection?
    ) async throws -> Response {
        var request = request
        let bytes = Array(buffer: try await request.collectBody(upTo: 1024 * 1024))
        let delay = await state.responseDelayMilliseconds
        if delay > 0 { try await Task.sleep(for: .milliseconds(delay)) }
        let authorization = request.headers[.authorization] ?? ""
        guard authorization.hasPrefix("Bearer "), await state.isValid(accessToken: String(authorization.dropFirst(7)))
        else {
            let message = (try? JSONValue.parse(bytes))?["message"]
            await state.record(
                .init(
                    receivedAt: Date(), deviceToken: message?["token"]?.stringValue ?? "", status: 401, attempt: 0,
                    message: message ?? .null, name: nil, connection: connection))
            return Self.answer(FCMErrorScenario.unauthenticated())
        }
        guard project == account.projectID else {
            return Self.answer(
                FCMErrorScenario.fcmError(
                    403, "PERMISSION_DENIED", "Permission denied on project.", code: "SENDER_ID_MISMATCH"))
        }
        // Exactly one target: a registration `token`, the installation `fid` newer SDKs send, or a `topic`.
        let body = try? JSONValue.parse(bytes)
        let message = body?["message"]
        let validateOnly = body?["validate_only"] == .bool(true)
        let targets = ["token", "fid", "topic"].compactMap { message?[$0]?.stringValue }
        guard let message, targets.count == 1, let target = targets.first, !target.isEmpty else {
            return Self.answer(
                FCMErrorScenario.invalidPayload(field: "message", description: "Exactly one target is required"))
        }
        let topic = message["topic"]?.stringValue
        if let topic, !Self.isTopicName(topic) {
            return Self.answer(FCMErrorScenario.invalidPayload(field: "message.topic", description: "Invalid topic"))
        }
        let attempt = await state.nextAttempt(for: target)
        // A topic needs no device: only the message's own checks apply to it.
        var answer =
            Self.validate(message: message, size: bytes.count)
            ?? (topic == nil ? FCMErrorScenario.answer(deviceToken: target, attempt: attempt) : nil)
        if answer == nil, topic == nil {
            answer = await state.injectedFailure(
                forMessage: target + "|" + SHA256.hexPrefix(of: String(decoding: bytes, as: UTF8.self), length: 32))
        }
        // A dry run's answer names no real message (`…/messages/fake_message_id`, as Google answers it).
        let name =
            answer != nil
            ? nil
            : validateOnly
                ? "projects/\(project)/messages/fake_message_id"
                : await state.nextMessageName(project: project)
        await state.record(
            .init(
                receivedAt: Date(), deviceToken: target, status: answer?.status ?? 200, attempt: attempt,
                message: message, name: name, connection: connection, validateOnly: validateOnly))
        if let answer { return Self.answer(answer) }
        return Self.json(200, .object(["name": .string(name ?? "")]))
    }

    /// FCM's rule for a topic's name: `[a-zA-Z0-9-_.~%]+`.
    static func isTopicName(_ topic: String) -> Bool {
        !topic.isEmpty && topic.utf8.count <= 900
            && topic.unicodeScalars.allSatisfy {
                ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
                    || "-_.~%".unicodeScalars.contains($0)
            }
    }

    /// FCM's own checks on a message: string-only, unreserved data; a short collapse id; the 4096-byte limit.
    static func validate(message: JSONValue, size: Int) -> FCMErrorScenario.Answer? {
        if let data = message["data"] {
            guard let members = data.objectValue else {
                return FCMErrorScenario.invalidPayload(field: "message.data", description: "data must be a map")
            }
            for (key, value) in members {
                guard value.stringValue != nil else {
                    return FCMErrorScenario.invalidPayload(
                        field: "message.data[\(key)]", description: "Invalid value (TYPE_STRING)")
                }
                if key == "from" || key == "message_type" || key.hasPrefix("google.") || key.hasPrefix("gcm.") {
                    return FCMErrorScenario.invalidPayload(
                        field: "message.data", description: "Invalid data payload key: \(key)")
                }
            }
        }
        if let collapseID = message["apns"]?["headers"]?["apns-collapse-id"]?.stringValue, collapseID.utf8.count > 64 {
            return FCMErrorScenario.invalidPayload(
                field: "message.apns.headers", description: "apns-collapse-id too long")
        }
        if size > payloadLimit {
            return FCMErrorScenario.invalidPayload(field: "message", description: "Message is too big")
        }
        return nil
    }

    // MARK: inspection

    private func listMessages(deliveredOnly: Bool) async -> Response {
        // A dry run (`validate_only`) is never a delivered message.
        let received = await state.received.filter { !deliveredOnly || ($0.status == 200 && !$0.validateOnly) }
        let entries: [JSONValue] = received.map { entry in
            .object([
                "receivedAtMs": .number((entry.receivedAt.timeIntervalSince1970 * 1000).rounded()),
                "token": .string(entry.deviceToken), "status": .number(Double(entry.status)),
                "attempt": .number(Double(entry.attempt)), "name": entry.name.map(JSONValue.string) ?? .null,
                "message": entry.message,
                "connection": entry.connection.map { .number(Double($0.number)) } ?? .null,
                "validateOnly": .bool(entry.validateOnly),
                "httpVersion": entry.connection.map { .string($0.http2 ? "2" : "1.1") } ?? .null,
            ])
        }
        return Self.json(200, .object([deliveredOnly ? "messages" : "requests": .array(entries)]))
    }

    /// Counts, with what a test needs to see multiplexing and reuse: `connections` is how many distinct connections
    /// (over TLS: handshakes) have carried `messages:send`, `maxConcurrentStreams` the most sends in flight on one of
    /// them at once, `http2Requests` how many arrived as HTTP/2 streams.
    private func stats() async -> Response {
        let received = await state.received
        let usage = await state.connectionUsage
        return Self.json(
            200,
            .object([
                "mints": .number(Double(await state.mints)), "requests": .number(Double(received.count)),
                "delivered": .number(Double(received.filter { $0.status == 200 && !$0.validateOnly }.count)),
                "tls": .bool(await state.tls), "connections": .number(Double(usage.connections)),
                "http2Requests": .number(Double(received.filter { $0.connection?.http2 == true }.count)),
                "maxConcurrentStreams": .number(Double(usage.maxConcurrentStreams)),
            ]))
    }

    private func configure(_ request: Request) async throws -> Response {
        var request = request
        let body = try? JSONValue.parse(Array(buffer: try await request.collectBody(upTo: 64 * 1024)))
        await state.configure(
            responseDelayMilliseconds: body?["delayMs"]?.integerValue.map(Int.init),
            revokeAccessTokens: body?["revokeAccessTokens"]?.boolValue == true)
        return Self.json(200, .object(["ok": .bool(true)]))
    }

    // MARK: encoding

    static func parseForm(_ body: String) -> [String: String] {
        var form: [String: String] = [:]
        for pair in body.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map {
                $0.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
            }
            if parts.count == 2 { form[parts[0]] = parts[1] }
        }
        return form
    }

    static func oauthError(_ error: String, _ description: String) -> Response {
        json(400, .object(["error": .string(error), "error_description": .string(description)]))
    }

    static func answer(_ answer: FCMErrorScenario.Answer) -> Response {
        var response = json(answer.status, answer.body)
        for (name, value) in answer.headers {
            if let field = HTTPField.Name(name) { response.headers[field] = value }
        }
        return response
    }

    static func json(_ status: Int, _ value: JSONValue) -> Response {
        let bytes = value.serialized ?? Array("{}".utf8)
        return Response(
            status: .init(code: status), headers: [.contentType: "application/json; charset=UTF-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

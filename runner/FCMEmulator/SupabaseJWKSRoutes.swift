import Codecs
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// A stand-in for a Supabase project's signing-key endpoint, served beside the FCM emulator so that the local stack
/// and the tests look like a current Supabase project (asymmetric keys, fetched by `SUPABASE_JWKS_URL`).
///
/// - `GET /auth/v1/.well-known/jwks.json` — the document, as Supabase serves it (`application/json`, cacheable for
///   ten minutes); 503 while "down".
/// - `PUT /_emulator/jwks` (or `POST`, for clients that only send bodies with POST) — the document to serve, stored
///   byte for byte (a test may serve garbage on purpose); rotation is a test sending the next set (standby key
///   added, in-use key kept as previously used, revoked key removed).
/// - `POST /_emulator/jwks/down` `{"down": true}` — answer 503 until `{"down": false}`.
/// - `GET /_emulator/jwks/stats` — `{"fetches": n, "down": bool}`: every GET of the document, answered or not.
public enum SupabaseJWKSRoutes {
    /// Supabase's path for a project's JWKS.
    public static let path = "/auth/v1/.well-known/jwks.json"

    /// Adds the routes to a router; `state` holds what they serve (one fake project per process by default).
    public static func add<Context: RequestContext>(to router: Router<Context>, state: SupabaseJWKSState = .shared) {
        router.get(RouterPath(path)) { _, _ in
            guard let document = await state.fetch() else {
                return FCMEmulator.json(
                    503, .object(["code": .number(503), "msg": .string("Service temporarily unavailable")]))
            }
            return Response(
                status: .ok,
                headers: [.contentType: "application/json", .cacheControl: "public, max-age=600"],
                body: .init(byteBuffer: ByteBuffer(bytes: document)))
        }
        for method in [HTTPRequest.Method.put, .post] {
            router.on("/_emulator/jwks", method: method) { request, context in
                // Installs the keys the functions trust: never from another site's page (``LocalControl``).
                try LocalControl.check(request, context)
                var request = request
                await state.serve(Array(buffer: try await request.collectBody(upTo: 1024 * 1024)))
                return FCMEmulator.json(200, .object(["ok": .bool(true)]))
            }
        }
        router.post("/_emulator/jwks/down") { request, context in
            try LocalControl.check(request, context)
            var request = request
            let body = try? JSONValue.parse(Array(buffer: try await request.collectBody(upTo: 4096)))
            await state.setDown(body?["down"]?.boolValue == true)
            return FCMEmulator.json(200, .object(["ok": .bool(true)]))
        }
        router.get("/_emulator/jwks/stats") { request, context in
            try LocalControl.check(request, context)
            return FCMEmulator.json(
                200, .object(["fetches": .number(Double(await state.fetches)), "down": .bool(await state.isDown)]))
        }
    }
}

/// What the fake Supabase JWKS endpoint serves, and how often it was asked.
public actor SupabaseJWKSState {
    /// The process's fake project: `runner dev` sets the demo's keys here before serving.
    public static let shared = SupabaseJWKSState()

    private var document: [UInt8] = Array(#"{"keys":[]}"#.utf8)
    public private(set) var isDown = false
    public private(set) var fetches = 0

    public init() {}

    /// Serves `document` from now on.
    public func serve(_ document: [UInt8]) {
        self.document = document
    }

    func setDown(_ down: Bool) {
        isDown = down
    }

    /// Counts a GET; the document, or `nil` while down.
    func fetch() -> [UInt8]? {
        fetches += 1
        return isDown ? nil : document
    }
}

import Codecs

/// How the emulator answers a device token, chosen by a marker inside the token (a real FCM token never holds one),
/// so that tests and developers can pick each error of docs/behaviour.md#outcomes per device.
///
/// | marker in the token | answer |
/// |---|---|
/// | `UNREGISTERED` | 404 UNREGISTERED |
/// | `SENDER_ID_MISMATCH` | 403 SENDER_ID_MISMATCH |
/// | `INVALID_TOKEN` | 400 INVALID_ARGUMENT about the registration token |
/// | `INVALID_PAYLOAD` | 400 INVALID_ARGUMENT about the payload |
/// | `THIRD_PARTY_AUTH` | 401 THIRD_PARTY_AUTH_ERROR |
/// | `QUOTA_ONCE` | 429 QUOTA_EXCEEDED with `Retry-After: 1`, then success |
/// | `QUOTA_PAUSE2` | 429 QUOTA_EXCEEDED with `Retry-After: 2`, then success |
/// | `UNAVAILABLE_ONCE` / `INTERNAL_ONCE` | 503 / 500 once, then success |
/// | `UNAVAILABLE_ALWAYS` | 503 every time |
/// | `UNAUTHENTICATED_ONCE` | 401 UNAUTHENTICATED (no FcmError) once, then success |
/// | anything else | 200 with a message name |
public enum FCMErrorScenario {
    /// A canned error answer.
    public struct Answer: Sendable {
        public let status: Int
        public let body: JSONValue
        public let headers: [String: String]
    }

    /// The error to answer for this attempt, or `nil` for success.
    public static func answer(deviceToken token: String, attempt: Int) -> Answer? {
        if token.hasMarker("UNREGISTERED") {
            return fcmError(404, "NOT_FOUND", "Requested entity was not found.", code: "UNREGISTERED")
        }
        if token.hasMarker("SENDER_ID_MISMATCH") {
            return fcmError(403, "PERMISSION_DENIED", "SenderId mismatch", code: "SENDER_ID_MISMATCH")
        }
        if token.hasMarker("INVALID_TOKEN") {
            return fcmError(
                400, "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token",
                code: "INVALID_ARGUMENT",
                extra: [badRequest(field: "message.token", description: "Invalid registration token")])
        }
        if token.hasMarker("INVALID_PAYLOAD") {
            return invalidPayload(field: "message.apns.payload", description: "Invalid APNs payload")
        }
        if token.hasMarker("THIRD_PARTY_AUTH") {
            return fcmError(
                401, "UNAUTHENTICATED",
                "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie "
                    + "or other valid authentication credential.",
                code: "THIRD_PARTY_AUTH_ERROR")
        }
        if token.hasMarker("QUOTA_ONCE"), attempt == 1 {
            return fcmError(
                429, "RESOURCE_EXHAUSTED", "Quota exceeded for quota metric 'Send messages'.", code: "QUOTA_EXCEEDED",
                headers: ["retry-after": "1"])
        }
        if token.hasMarker("QUOTA_PAUSE2"), attempt == 1 {
            return fcmError(
                429, "RESOURCE_EXHAUSTED", "Quota exceeded for quota metric 'Send messages'.", code: "QUOTA_EXCEEDED",
                headers: ["retry-after": "2"])
        }
        if token.hasMarker("UNAVAILABLE_ALWAYS") || (token.hasMarker("UNAVAILABLE_ONCE") && attempt == 1) {
            return unavailable()
        }
        if token.hasMarker("INTERNAL_ONCE"), attempt == 1 {
            return fcmError(500, "INTERNAL", "Internal error encountered.", code: "INTERNAL")
        }
        if token.hasMarker("UNAUTHENTICATED_ONCE"), attempt == 1 {
            return unauthenticated()
        }
        return nil
    }

    /// 503 UNAVAILABLE, with `Retry-After` when given (FCM may send one with it).
    public static func unavailable(retryAfterSeconds: Int? = nil) -> Answer {
        fcmError(
            503, "UNAVAILABLE", "The service is currently unavailable.", code: "UNAVAILABLE",
            headers: retryAfterSeconds.map { ["retry-after": String($0)] } ?? [:])
    }

    /// Our own access token refused: google.rpc.Status without an FcmError detail.
    public static func unauthenticated() -> Answer {
        Answer(
            status: 401,
            body: .object([
                "error": .object([
                    "code": .number(401),
                    "message": .string(
                        "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or "
                            + "other valid authentication credential."),
                    "status": .string("UNAUTHENTICATED"),
                ])
            ]),
            headers: ["www-authenticate": "Bearer realm=\"https://accounts.google.com/\", error=\"invalid_token\""])
    }

    /// A payload FCM rejects (non-string data value, reserved key, oversized message).
    public static func invalidPayload(field: String, description: String) -> Answer {
        fcmError(
            400, "INVALID_ARGUMENT", "Request contains an invalid argument.", code: "INVALID_ARGUMENT",
            extra: [badRequest(field: field, description: description)])
    }

    static func fcmError(
        _ status: Int, _ rpcStatus: String, _ message: String, code: String, extra: [JSONValue] = [],
        headers: [String: String] = [:]
    ) -> Answer {
        let detail: JSONValue = .object([
            "@type": .string("type.googleapis.com/google.firebase.fcm.v1.FcmError"), "errorCode": .string(code),
        ])
        return Answer(
            status: status,
            body: .object([
                "error": .object([
                    "code": .number(Double(status)), "message": .string(message), "status": .string(rpcStatus),
                    "details": .array([detail] + extra),
                ])
            ]),
            headers: headers)
    }

    static func badRequest(field: String, description: String) -> JSONValue {
        .object([
            "@type": .string("type.googleapis.com/google.rpc.BadRequest"),
            "fieldViolations": .array([.object(["field": .string(field), "description": .string(description)])]),
        ])
    }
}

extension String {
    /// Whether `marker` occurs in the token, compared byte for byte over the two strings' UTF-8 spans. Foundation's
    /// `contains`, which the module's imports would otherwise pick, searches through `NSString` (a tenth of the
    /// stand-in's CPU under load), and the standard library's `firstRange(of:)` over the UTF-8 views cost more still.
    fileprivate func hasMarker(_ marker: String) -> Bool {
        let (haystack, needle) = (utf8.span, marker.utf8.span)
        guard needle.count <= haystack.count else { return false }
        candidates: for start in 0...(haystack.count - needle.count) {
            for offset in 0..<needle.count where haystack[start + offset] != needle[offset] { continue candidates }
            return true
        }
        return false
    }
}

@testable import Curl
@testable import CaregiverPush
import Foundation
import Testing
import TestFixtures

/// Classification of `messages:send` answers, fed Google's exact JSON shapes (docs/behaviour.md#outcomes).
@Suite("FCM answer classification")
struct FCMSendOutcomeTests {
    static func response(_ status: Int, _ body: String, headers: [String: String] = [:]) -> CurlResponse {
        CurlResponse(status: status, headers: headers, body: Array(body.utf8))
    }

    static func fcmError(_ status: Int, _ rpc: String, _ code: String, message: String = "m", extra: String = "")
        -> String
    {
        """
        {"error": {"code": \(status), "message": "\(message)", "status": "\(rpc)",
          "details": [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "\(code)"}\(extra)]}}
        """
    }

    @Test("200 with a name is sent; 200 without one is a failure")
    func success() {
        #expect(
            FCMSendOutcome.classify(
                Self.response(200, #"{"name": "projects/p/messages/0:1500415314455276%31bd1c9631bd1c96"}"#))
                == .sent(messageName: "projects/p/messages/0:1500415314455276%31bd1c9631bd1c96"))
        #expect(FCMSendOutcome.classify(Self.response(200, "{}")) == .fail(error: "200 without a message name"))
    }

    @Test("UNREGISTERED is found in details even though the status says NOT_FOUND")
    func unregisteredFromDetails() {
        let body = Self.fcmError(404, "NOT_FOUND", "UNREGISTERED", message: "Requested entity was not found.")
        #expect(
            FCMSendOutcome.classify(Self.response(404, body))
                == .disableDevice(.unregistered, error: "404 UNREGISTERED"))
    }

    @Test("SENDER_ID_MISMATCH disables")
    func senderMismatch() {
        let body = Self.fcmError(403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH")
        #expect(
            FCMSendOutcome.classify(Self.response(403, body))
                == .disableDevice(.senderIDMismatch, error: "403 SENDER_ID_MISMATCH"))
    }

    @Test("INVALID_ARGUMENT disables only when it is about the registration token")
    func invalidArgument() {
        let byMessage = Self.fcmError(
            400, "INVALID_ARGUMENT", "INVALID_ARGUMENT",
            message: "The registration token is not a valid FCM registration token")
        #expect(
            FCMSendOutcome.classify(Self.response(400, byMessage))
                == .disableDevice(.invalidArgument, error: "400 INVALID_ARGUMENT"))
        let byField = Self.fcmError(
            400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", message: "Request contains an invalid argument.",
            extra:
                #", {"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [{"field": "message.token", "description": "x"}]}"#
        )
        #expect(
            FCMSendOutcome.classify(Self.response(400, byField))
                == .disableDevice(.invalidArgument, error: "400 INVALID_ARGUMENT"))
        let payload = Self.fcmError(
            400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", message: "Request contains an invalid argument.",
            extra:
                #", {"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [{"field": "message.data[0].value", "description": "x"}]}"#
        )
        #expect(FCMSendOutcome.classify(Self.response(400, payload)) == .fail(error: "400 INVALID_ARGUMENT"))
    }

    @Test("QUOTA_EXCEEDED, UNAVAILABLE and INTERNAL retry, carrying Retry-After")
    func retryable() {
        #expect(
            FCMSendOutcome.classify(
                Self.response(
                    429, Self.fcmError(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"), headers: ["retry-after": "7"]))
                == .retry(retryAfter: 7, error: "429 QUOTA_EXCEEDED"))
        #expect(
            FCMSendOutcome.classify(Self.response(503, Self.fcmError(503, "UNAVAILABLE", "UNAVAILABLE")))
                == .retry(retryAfter: nil, error: "503 UNAVAILABLE"))
        #expect(
            FCMSendOutcome.classify(Self.response(500, Self.fcmError(500, "INTERNAL", "INTERNAL")))
                == .retry(retryAfter: nil, error: "500 INTERNAL"))
        #expect(
            FCMSendOutcome.classify(Self.response(502, "<html>bad gateway</html>"))
                == .retry(retryAfter: nil, error: "502 HTTP_502"))
    }

    @Test("401 without an FcmError is our token (re-mint); THIRD_PARTY_AUTH_ERROR is not")
    func unauthenticated() {
        let ours =
            #"{"error": {"code": 401, "message": "Request had invalid authentication credentials.", "status": "UNAUTHENTICATED"}}"#
        #expect(FCMSendOutcome.classify(Self.response(401, ours)) == .refreshAccessToken)
        let apns = Self.fcmError(
            401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR", message: "Expected OAuth 2 access token")
        #expect(FCMSendOutcome.classify(Self.response(401, apns)) == .fail(error: "401 THIRD_PARTY_AUTH_ERROR"))
    }

    @Test("Retry-After takes delay-seconds, capped at an hour; an HTTP-date is left to the back-off")
    func retryAfterParsing() {
        #expect(FCMSendOutcome.retryAfterSeconds("30") == 30)
        #expect(FCMSendOutcome.retryAfterSeconds("999999") == 3600)
        #expect(FCMSendOutcome.retryAfterSeconds("Wed, 21 Oct 2026 07:28:00 GMT") == nil)
    }

    @Test("back-off doubles per attempt with jitter, and never undercuts Retry-After")
    func backoff() {
        // The policy a sender runs with: its limits, and a random jitter.
        let policy = RetryPolicy()
        for attempt in 1...4 {
            let full = 0.5 * pow(2, Double(attempt - 1))
            for _ in 0..<20 {
                let delay = Double(policy.backoff(afterAttempt: attempt, retryAfter: nil).milliseconds) / 1000
                #expect(delay >= full / 2 - 0.002 && delay <= full + 0.002)
            }
        }
        #expect(policy.backoff(afterAttempt: 1, retryAfter: 3).milliseconds >= 3000)
    }
}

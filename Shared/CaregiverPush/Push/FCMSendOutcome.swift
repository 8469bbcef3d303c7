import Codecs
import Curl
import FoundationEssentials

/// What one `messages:send` answer means for its device (docs/behaviour.md#outcomes).
///
/// The `FcmError.errorCode` in `details` decides first and the top-level `status` second: libraries that looked only
/// at `status` missed UNREGISTERED. An INVALID_ARGUMENT disables the device only when it is about the token —
/// disabling on every 400 would wipe valid tokens after one bad payload.
public enum FCMSendOutcome: Equatable, Sendable {
    /// Delivered; the message's resource name.
    case sent(messageName: String)
    /// The token is dead or foreign: disable the device, never retry.
    case disableDevice(PushDeviceRegistry.DisabledReason, error: String)
    /// Worth another attempt, not before `retryAfter` seconds when the server said so.
    case retry(retryAfter: TimeInterval?, error: String)
    /// Our access token was refused (401 without an FcmError): mint a new one and try again.
    case refreshAccessToken
    /// Will not succeed by retrying (a bad payload, the project's APNs credentials, an unknown 4xx).
    case fail(error: String)

    /// Classifies an HTTP answer of `messages:send`.
    public static func classify(_ response: CurlResponse) -> FCMSendOutcome {
        let document = try? JSONValue.parse(response.body)
        if (200..<300).contains(response.status) {
            guard let name = document?["name"]?.stringValue, !name.isEmpty else {
                return .fail(error: "200 without a message name")
            }
            return .sent(messageName: name)
        }
        let error = document?["error"]
        let details = error?["details"]?.arrayValue ?? []
        let fcmCode = details.first { $0["@type"]?.stringValue?.hasSuffix("google.firebase.fcm.v1.FcmError") == true }?[
            "errorCode"]?.stringValue
        let status = error?["status"]?.stringValue
        let code = fcmCode ?? status ?? "HTTP_\(response.status)"
        let retryAfter = response.headers["retry-after"].flatMap(Self.retryAfterSeconds)
        let summary = "\(response.status) \(code)"
        switch code {
        case "UNREGISTERED":
            return .disableDevice(.unregistered, error: summary)
        case "SENDER_ID_MISMATCH":
            return .disableDevice(.senderIDMismatch, error: summary)
        case "INVALID_ARGUMENT":
            return isAboutToken(error: error, details: details)
                ? .disableDevice(.invalidArgument, error: summary) : .fail(error: summary)
        case "QUOTA_EXCEEDED", "UNAVAILABLE", "INTERNAL", "RESOURCE_EXHAUSTED":
            return .retry(retryAfter: retryAfter, error: summary)
        case "THIRD_PARTY_AUTH_ERROR":
            return .fail(error: summary)
        case "UNAUTHENTICATED":
            return .refreshAccessToken
        default:
            if response.status == 401 && fcmCode == nil { return .refreshAccessToken }
            if response.status == 429 || response.status >= 500 {
                return .retry(retryAfter: retryAfter, error: summary)
            }
            return .fail(error: summary)
        }
    }

    /// How long the whole sender must pause: a 429 (`QUOTA_EXCEEDED`, `RESOURCE_EXHAUSTED`) carrying `Retry-After`.
    /// Google's throttling guidance asks the sender, not just the device, to stop for that long; a 429 without it
    /// backs off that device alone.
    public static func senderPause(_ response: CurlResponse) -> TimeInterval? {
        guard response.status == 429 else { return nil }
        return response.headers["retry-after"].flatMap(retryAfterSeconds).flatMap { $0 > 0 ? $0 : nil }
    }

    /// A 400 is about the registration token when its message says so or a field violation names `message.token`.
    private static func isAboutToken(error: JSONValue?, details: [JSONValue]) -> Bool {
        if let message = error?["message"]?.stringValue?.lowercased(), message.contains("registration token") {
            return true
        }
        return details.contains { detail in
            (detail["fieldViolations"]?.arrayValue ?? []).contains { violation in
                violation["field"]?.stringValue == "message.token"
            }
        }
    }

    /// `Retry-After` as delay-seconds (RFC 9110 §10.2.3); an HTTP-date is ignored in favour of our back-off.
    static func retryAfterSeconds(_ value: String) -> TimeInterval? {
        guard let seconds = Int(value.trimmingOptionalWhitespace()), seconds >= 0 else { return nil }
        return TimeInterval(min(seconds, 3600))
    }
}

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Foundation

/// Why `push/register` or `push/unregister` failed, from the server's `application/problem+json` answer or from the
/// transport.
///
/// The `description` names the kind of failure and nothing else: no device token, no bearer token, no URL query.
/// ``errorState`` is what the settings screen acts on.
public enum PushAPIError: Error, Sendable, Equatable, CustomStringConvertible {
    /// One invalid field of a 422 `/problems/validation` answer.
    public struct FieldError: Sendable, Equatable, Decodable {
        public let field: String
        public let message: String

        public init(field: String, message: String) {
            self.field = field
            self.message = message
        }
    }

    /// 422 `/problems/validation`: every invalid field, with the server's message.
    case validation([FieldError])
    /// 401 (`/problems/unauthorized`), or no caregiver session to take a bearer token from.
    case signInRequired
    /// 503 `/problems/unavailable`; `retryAfterSeconds` from `Retry-After` (delta-seconds form), when sent.
    case unavailable(retryAfterSeconds: Int?)
    /// Any other answer that is not 200: its status and problem `type`, when it had one.
    case server(status: Int, problemType: String?)
    /// A 200 whose body is not the endpoint's answer (a captive portal's page, a proxy's).
    case unexpectedAnswer
    /// No answer within the client's budget (``CaregiverPushRequestBudget``).
    case timedOut
    /// No answer at all: offline, the host unreachable, the connection lost; `.cancelled` when the caller's task was
    /// cancelled.
    case network(URLError.Code)

    public var description: String {
        switch self {
        case .validation(let fields): "validation failed: \(fields.map(\.field).joined(separator: ", "))"
        case .signInRequired: "sign in again"
        case .unavailable(let seconds): "service unavailable" + (seconds.map { ", retry after \($0) s" } ?? "")
        case .server(let status, let type): "server answered \(status)" + (type.map { " (\($0))" } ?? "")
        case .unexpectedAnswer: "unexpected answer"
        case .timedOut: "timed out"
        case .network(let code): "network error \(code.rawValue)"
        }
    }

    /// What the screen offers for this failure, from the server's problem `type` where it sent one:
    /// `/problems/unauthorized` and `/problems/forbidden` (a bearer that is not a caregiver's) → sign in again;
    /// `/problems/unavailable`, `/problems/internal`, any other 5xx, a timeout or no network → retry; a 422 or any
    /// other 4xx → a bug report (the app sent something the server cannot take, and retrying will not change it).
    public var errorState: CaregiverPushErrorState {
        switch self {
        case .signInRequired: return .signInRequired
        case .unavailable, .timedOut, .network, .unexpectedAnswer: return .retry
        case .validation: return .reportBug(problemType: "/problems/validation")
        case .server(let status, let type):
            switch type {
            case "/problems/unauthorized", "/problems/forbidden": return .signInRequired
            case "/problems/unavailable", "/problems/internal": return .retry
            case .some: return status >= 500 ? .retry : .reportBug(problemType: type)
            case nil: return status >= 500 ? .retry : status == 401 ? .signInRequired : .reportBug(problemType: nil)
            }
        }
    }

    /// Whether a retry within the budget may succeed: no answer, or a 5xx. The calls are idempotent. A cancelled
    /// call is not retried.
    var isTransient: Bool {
        switch self {
        case .network(let code): code != .cancelled
        case .timedOut, .unavailable: true
        case .server(let status, _): status >= 500
        default: false
        }
    }
}

/// A failure of the push flow as the settings screen shows it: its sentence and the one action it offers.
public enum CaregiverPushErrorState: Sendable, Hashable {
    /// Notifications are not allowed: the action opens the app's page in the Settings app.
    case permissionDenied
    /// No answer, a timeout, 503 or another 5xx: the action tries again.
    case retry
    /// 401 or no session: the action goes to sign-in.
    case signInRequired
    /// 422 or another 4xx the app should never cause: the action files a bug report (with the problem `type`).
    case reportBug(problemType: String?)
    /// The phone has no FCM token yet: the action tries again.
    case tokenUnavailable

    /// The button the screen shows.
    public enum Action: Sendable, Hashable {
        /// `UIApplication.openSettingsURLString`.
        case openSystemSettings
        case retry
        case signIn
        case reportBug
    }

    public var action: Action {
        switch self {
        case .permissionDenied: .openSystemSettings
        case .retry, .tokenUnavailable: .retry
        case .signInRequired: .signIn
        case .reportBug: .reportBug
        }
    }

    public var messageKey: CaregiverPushStringKey {
        switch self {
        case .permissionDenied: .errorPermissionDenied
        case .retry: .errorNetwork
        case .signInRequired: .errorSignIn
        case .reportBug: .errorBug
        case .tokenUnavailable: .errorTokenUnavailable
        }
    }

    public var actionKey: CaregiverPushStringKey {
        switch action {
        case .openSystemSettings: .actionOpenSettings
        case .retry: .actionRetry
        case .signIn: .actionSignIn
        case .reportBug: .actionReportBug
        }
    }
}

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Foundation

/// Why `push/register` or `push/unregister` failed, from the server's `application/problem+json` answer or from the
/// transport.
///
/// The `description` names the kind of failure and nothing else: no device token, no bearer token, no URL query.
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
    /// 401, or no caregiver session to take a bearer token from: the caregiver must sign in again.
    case signInRequired
    /// 503 `/problems/unavailable`; `retryAfterSeconds` from `Retry-After` (delta-seconds form), when sent.
    case unavailable(retryAfterSeconds: Int?)
    /// Any other answer that is not 200: its status and problem `type`, when it had one.
    case server(status: Int, problemType: String?)
    /// A 200 whose body is not `{"ok": true}`.
    case unexpectedAnswer
    /// No answer within the client's timeout.
    case timedOut
    /// No answer at all: offline, the host unreachable, the connection lost.
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

    /// A sentence for the caregiver (the app is Japanese), for the settings screen's error message.
    public var userMessage: String {
        switch self {
        case .validation: "通知の登録内容に問題がありました。時間をおいてもう一度お試しください。"
        case .signInRequired: "ログインの有効期限が切れました。もう一度ログインしてください。"
        case .unavailable: "サーバーが混み合っています。しばらくしてからもう一度お試しください。"
        case .server, .unexpectedAnswer: "通知の設定を更新できませんでした。時間をおいてもう一度お試しください。"
        case .timedOut, .network: "通信できませんでした。ネットワーク接続を確認してもう一度お試しください。"
        }
    }
}

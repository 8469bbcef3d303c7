import Foundation

/// How FCM knows this phone: a registration token, or — for an app that opted in with
/// `FirebaseMessagingInstallationIdEnabled` (firebase-ios-sdk 12.18 and later) — its Firebase Installation ID.
///
/// The server addresses each message by the matching HTTP v1 field (`token` or `fid`), never both. An installation
/// that moves from its token to its FID (an app update that opts in) stays one device on the server: the kit sends the
/// same ``PushTokenLifecycle/installationId`` on both paths, and the FID's registration replaces the token's.
public enum PushRegistrationID: Sendable, Hashable {
    /// `messaging(_:didReceiveRegistrationToken:)` / `Messaging.messaging().token()`.
    case token(String)
    /// `messaging(_:didReceiveRegistration:)` / `Messaging.messaging().register()`.
    case fid(String)

    /// The identity's text, as the server stores it.
    public var text: String {
        switch self {
        case .token(let token): token
        case .fid(let fid): fid
        }
    }

    /// The request body's field that carries it: `token` or `fid`.
    public var field: String {
        switch self {
        case .token: "token"
        case .fid: "fid"
        }
    }

    /// The identity from its stored text and field (`nil` field: a token, as before FIDs).
    init(text: String, field: String?) {
        self = field == "fid" ? .fid(text) : .token(text)
    }
}

/// The phone's current FCM identity, for an app on the FID path: `Messaging.messaging().register()`.
@MainActor
public protocol PushRegistrationSource {
    func currentRegistration() async throws -> PushRegistrationID
}

/// A ``PushTokenSource`` (the token path) seen as a ``PushRegistrationSource``.
@MainActor
struct TokenRegistrationSource: PushRegistrationSource {
    let tokens: any PushTokenSource

    func currentRegistration() async throws -> PushRegistrationID {
        .token(try await tokens.currentToken())
    }
}

import Codecs
import Libpq
import Curl
import OpenSSLCrypto
import JOSE
import FoundationEssentials
import Logging

/// The OAuth2 access token that authorises FCM sends, minted from the service account and shared.
///
/// Minting is slow and rate-limited, so one token serves every invocation: it lives in `fcm_access_tokens` (keyed by
/// client email) and, in a warm process, in memory too. The row holds the token sealed (AES-256-GCM, the client email
/// as associated data) under a key derived from the service account's private key, which the database never sees:
/// a reader of the table cannot push, and a row that does not open (sealed under a rotated key, or altered) is
/// treated as no token at all — a new one is minted over it, the row is never trusted. It is refreshed when under five minutes remain. Minting
/// happens under a transaction-scoped advisory lock, and the row is read again once the lock is held, so that many
/// cold invocations arriving together mint one token, not one each.
public final class AccessTokenProvider {
    /// Refresh when less than this remains (the Node Admin SDK's margin).
    static let refreshMargin: TimeInterval = 300
    static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    /// First key of the advisory lock taken while minting; the second is the client email's hash.
    static let lockNamespace = 0x4643_4D54  // "FCMT"

    public let account: ServiceAccount
    /// Whom the token endpoint's certificate must chain to.
    public let trust: TrustStore
    private let signingKey: PrivateKey
    /// The key that seals the stored token: HKDF-SHA-256 of the private key's PKCS#8 PEM (so that the same key written
    /// with other line breaks derives the same key).
    private let sealingKey: [UInt8]
    private var cached: (token: String, expiresAt: Date)?

    /// - Throws: ``ConfigurationError`` when the key's `private_key` is not a usable RSA key.
    public init(
        account: ServiceAccount, variable: String = "FCM_SERVICE_ACCOUNT_JSON", trust: TrustStore = .process
    ) throws(ConfigurationError) {
        self.account = account
        self.trust = trust
        do {
            signingKey = try PrivateKey(pem: account.privateKeyPEM)
        } catch {
            throw ConfigurationError(variable: variable, reason: "has a private_key that is not a PEM private key")
        }
        guard signingKey.kind == .rsa else {
            throw ConfigurationError(variable: variable, reason: "has a private_key that is not an RSA key")
        }
        guard let normalized = try? signingKey.pemPKCS8() else {
            throw ConfigurationError(variable: variable, reason: "has a private_key that cannot be exported")
        }
        sealingKey = HKDFSHA256.deriveKey(
            inputKeyMaterial: Array(normalized.utf8), salt: Array("caregiver-push fcm access token".utf8),
            info: Array(account.clientEmail.utf8))
    }

    /// A token with at least five minutes left.
    /// - Parameters:
    ///   - connection: where the shared token lives.
    ///   - rejected: a token FCM has just refused (401): never returned again, a newer one is found or minted.
    ///   - timeoutMilliseconds: bound on a mint's HTTP exchange.
    /// - Throws: ``PostgresError``, or ``TokenExchangeError`` when Google's token endpoint refuses or fails.
    public func accessToken(
        connection: PostgresConnection, now: Date = Date(), rejected: String? = nil, timeoutMilliseconds: Int = 5000,
        logger: Logger
    ) throws -> String {
        func usable(_ token: String, _ expiresAt: Date) -> Bool {
            token != rejected && expiresAt.timeIntervalSince(now) > Self.refreshMargin
        }
        if let cached, usable(cached.token, cached.expiresAt) { return cached.token }
        if let stored = try connection.withTransaction({ try storedToken($0) }), usable(stored.token, stored.expiresAt)
        {
            cached = stored
            return stored.token
        }
        let token = try connection.withTransaction { connection -> (token: String, expiresAt: Date) in
            // Whoever holds the lock may be minting: wait as long as one mint may take, not the usual lock bound. The
            // holder is idle in its transaction during the HTTP call, for at most `timeoutMilliseconds`.
            try connection.query(
                """
                SELECT set_config('lock_timeout', \(String(timeoutMilliseconds + 1000)), true),
                       set_config('idle_in_transaction_session_timeout', \(String(timeoutMilliseconds + 2000)), true)
                """)
            try connection.query(
                "SELECT pg_advisory_xact_lock(\(Self.lockNamespace), hashtext(\(account.clientEmail)))")
            if let stored = try storedToken(connection), usable(stored.token, stored.expiresAt) { return stored }
            var minted = try mint(now: now, timeoutMilliseconds: timeoutMilliseconds)
            // Whole seconds, so that the instant sealed with the token is exactly the one stored beside it.
            minted.expiresAt = Date(timeIntervalSince1970: minted.expiresAt.timeIntervalSince1970.rounded(.down))
            let sealed = try AES256GCM.seal(
                Array(minted.token.utf8), key: sealingKey,
                associatedData: Self.associatedData(account.clientEmail, minted.expiresAt))
            try connection.query(
                """
                INSERT INTO caregiver_push.fcm_access_tokens (client_email, sealed_token, expires_at, updated_at)
                VALUES (\(account.clientEmail), \(PostgresBytes(sealed)), \(minted.expiresAt), now())
                ON CONFLICT (client_email) DO UPDATE
                SET sealed_token = EXCLUDED.sealed_token, expires_at = EXCLUDED.expires_at, updated_at = now()
                """)
            logger.info("fcm access token minted", metadata: ["fcm.client_email": .string(account.clientEmail)])
            return minted
        }
        cached = token
        return token.token
    }

    /// What the seal authenticates beside the token: the client email and the expiry stored with it (whole seconds),
    /// so that a writer of the table can neither move a token to another account nor make it look younger: either
    /// change and the row does not open, and a new token is minted over it.
    static func associatedData(_ clientEmail: String, _ expiresAt: Date) -> [UInt8] {
        Array("\(clientEmail)\n\(Int64(expiresAt.timeIntervalSince1970.rounded()))".utf8)
    }

    /// The stored token, when there is one that opens under this service account's key with its stored expiry.
    private func storedToken(_ connection: PostgresConnection) throws -> (token: String, expiresAt: Date)? {
        guard
            let row = try connection.query(
                """
                SELECT sealed_token, expires_at FROM caregiver_push.fcm_access_tokens
                WHERE client_email = \(account.clientEmail)
                """
            ).single
        else { return nil }
        let (sealed, expiresAt) = try row.decode((PostgresBytes, Date).self)
        guard
            let opened = try AES256GCM.open(
                sealed.bytes, key: sealingKey, associatedData: Self.associatedData(account.clientEmail, expiresAt)),
            let token = String(validating: opened, as: UTF8.self), !token.isEmpty
        else { return nil }
        return (token, expiresAt)
    }

    /// Exchanges a fresh RS256 assertion for an access token at the key's `token_uri`.
    func mint(now: Date, timeoutMilliseconds: Int) throws -> (token: String, expiresAt: Date) {
        let issuedAt = now.timeIntervalSince1970.rounded(.down)
        let assertion = try JWTSigner.sign(
            claims: [
                "iss": .string(account.clientEmail), "scope": .string(Self.scope), "aud": .string(account.tokenURI),
                "iat": .number(issuedAt), "exp": .number(issuedAt + 3600),
            ],
            using: .rsa(signingKey, kid: account.privateKeyID))
        let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
        let request = CurlRequest(
            method: "POST", url: account.tokenURI,
            headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")],
            body: Array(form.utf8), responseBodyLimit: 64 * 1024, trust: trust)
        let response: CurlResponse
        switch CurlClient.perform(request, timeoutMilliseconds: timeoutMilliseconds) {
        case .success(let value): response = value
        case .failure(let error): throw TokenExchangeError(status: nil, error: error.description)
        }
        let document = try? JSONValue.parse(response.body)
        guard response.status == 200, let token = document?["access_token"]?.stringValue, !token.isEmpty,
            let lifetime = document?["expires_in"]?.numberValue, lifetime > 0
        else {
            // `error` is an OAuth code such as invalid_grant; the description may quote the assertion, so skip it.
            throw TokenExchangeError(
                status: response.status, error: document?["error"]?.stringValue ?? "unexpected response")
        }
        return (token, now.addingTimeInterval(lifetime))
    }
}

/// Google's token endpoint did not issue a token. Carries the HTTP status and OAuth error code only.
public struct TokenExchangeError: Error, Equatable, CustomStringConvertible {
    public let status: Int?
    public let error: String
    public var description: String { "token exchange failed: \(status.map(String.init) ?? "no response") \(error)" }
}

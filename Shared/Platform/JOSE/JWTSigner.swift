import Codecs
import OpenSSLCrypto
import FoundationEssentials

/// The key a JWT is signed with; it decides the header's `alg` (and `kid`).
public enum JWTSigningKey {
    /// HS256 with a shared secret (the bytes of the secret as configured, e.g. the UTF-8 of Supabase's secret).
    case hmac(secret: [UInt8])
    /// RS256 with an RSA private key; `kid` goes into the header when given.
    case rsa(PrivateKey, kid: String?)
    /// ES256 with a P-256 private key; `kid` goes into the header when given.
    case ec(PrivateKey, kid: String?)
    /// EdDSA with an Ed25519 private key; `kid` goes into the header when given.
    case ed25519(PrivateKey, kid: String?)

    /// The JWS algorithm this key signs with.
    public var algorithm: JWTAlgorithm {
        switch self {
        case .hmac: .hs256
        case .rsa: .rs256
        case .ec: .es256
        case .ed25519: .edDSA
        }
    }

    var keyID: String? {
        switch self {
        case .hmac: nil
        case .rsa(_, let kid), .ec(_, let kid), .ed25519(_, let kid): kid
        }
    }
}

/// Builds compact JWS tokens (RFC 7515 §7.1): the Google OAuth service-account assertion (RS256, `kid` =
/// `private_key_id`), the dev tool's caregiver tokens, and test tokens.
public enum JWTSigner {
    /// Signs `claims` as a compact JWT.
    ///
    /// The header's `alg` always comes from `key` (overriding any `alg` in `header`); `kid` is set when the key
    /// carries one (otherwise a `kid` already in `header` is kept); `typ` is `JWT` unless `header` sets it.
    /// Both parts are serialised as JSON with sorted keys.
    /// - Parameters:
    ///   - header: extra header members, usually none.
    ///   - claims: the payload.
    ///   - key: the signing key.
    /// - Returns: `header.payload.signature`, each part unpadded base64url.
    /// - Throws: ``CryptoError`` when the key cannot sign (e.g. `.rsa` holding a P-256 key), or an
    ///   `EncodingError` from JSON serialisation.
    public static func sign(
        header: [String: JSONValue] = [:], claims: [String: JSONValue], using key: JWTSigningKey
    ) throws -> String {
        var header = header
        header["alg"] = .string(key.algorithm.rawValue)
        if let keyID = key.keyID { header["kid"] = .string(keyID) }
        if header["typ"] == nil { header["typ"] = .string("JWT") }
        return try sign(headerJSON: encode(header), payloadJSON: encode(claims), using: key)
    }

    /// Signs an already serialised header and payload, byte for byte, without looking at them.
    ///
    /// For tools and tests that need exact control (e.g. a payload with a duplicate member name). The caller is
    /// responsible for the header's `alg` matching `key`.
    /// - Returns: the compact JWT.
    /// - Throws: ``CryptoError`` when the key cannot sign.
    public static func sign(headerJSON: [UInt8], payloadJSON: [UInt8], using key: JWTSigningKey) throws -> String {
        let signingInput = Base64URL.encode(headerJSON) + "." + Base64URL.encode(payloadJSON)
        return signingInput + "." + Base64URL.encode(try signature(signingInput: signingInput, using: key))
    }

    /// The raw JWS signature of `signingInput` (the ASCII `header.payload`), as it goes, base64url-encoded, into
    /// the third segment. ES256 signatures are 64 bytes R‖S.
    /// - Throws: ``CryptoError`` when the key cannot sign.
    public static func signature(signingInput: String, using key: JWTSigningKey) throws -> [UInt8] {
        let message = Array(signingInput.utf8)
        switch key {
        case .hmac(let secret):
            return HMACSHA256.authenticationCode(key: secret, message: message)
        case .rsa(let privateKey, _):
            return try privateKey.sign(message: message, algorithm: .rs256)
        case .ec(let privateKey, _):
            return try privateKey.sign(message: message, algorithm: .es256)
        case .ed25519(let privateKey, _):
            return try privateKey.sign(message: message, algorithm: .edDSA)
        }
    }

    private static func encode(_ object: [String: JSONValue]) throws -> [UInt8] {
        let encoder = JSONCoding.encoder()
        return Array(try encoder.encode(JSONValue.object(object)))
    }
}

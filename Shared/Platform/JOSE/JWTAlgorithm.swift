/// The JWS algorithms (RFC 7518 §3.1) this project signs and accepts. Anything else, `none` included, is not
/// representable, so it cannot be chosen by mistake.
public enum JWTAlgorithm: String, Sendable {
    /// HMAC with SHA-256 over a shared secret (Supabase's legacy JWT secret).
    case hs256 = "HS256"
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    case rs256 = "RS256"
    /// ECDSA on P-256 with SHA-256, signature as 64 bytes R‖S.
    case es256 = "ES256"
    /// EdDSA (RFC 8037) with an Ed25519 key; the only curve accepted under this name.
    case edDSA = "EdDSA"
}

import Codecs
import OpenSSLCrypto
import JOSE
import ProcessSupervision
import Foundation

/// The local stack's caregiver-token signing key: an ES256 (P-256) key kept in `.data/`, created once, published by
/// the emulator at Supabase's JWKS path, so that `runner dev` verifies tokens the way a current Supabase project
/// does (asymmetric keys fetched by `SUPABASE_JWKS_URL`). For local development only.
struct DevSigningKey {
    static let file = ".data/dev-jwt-es256.pem"

    let privateKey: PrivateKey
    /// Derived from the public key, so it stays the same across restarts.
    let keyID: String

    /// Reads the key from ``file``, creating it first when there is none.
    /// - Parameter create: whether a missing key may be created (`runner dev`) or is an error (`runner token`).
    /// - Throws: when the file cannot be read or written, or holds no P-256 key.
    init(create: Bool) throws {
        let privateKey: PrivateKey
        if let pem = try? String(contentsOfFile: Self.file, encoding: .utf8) {
            privateKey = try PrivateKey(pem: pem)
        } else if create {
            privateKey = try PrivateKey.generateP256()
            try PrivateFile.create(atPath: Self.file, contents: Array(try privateKey.pemPKCS8().utf8))
        } else {
            throw CocoaError(.fileReadNoSuchFile)
        }
        guard privateKey.kind == .ecP256 else { throw CryptoError(.unsupportedKey, operation: Self.file) }
        self.privateKey = privateKey
        keyID = "dev-" + SHA256.hexPrefix(of: try privateKey.publicKeyPEM(), length: 16)
    }

    /// `{"keys":[…]}` with the public half, as Supabase publishes it.
    func jwksDocument() throws -> [UInt8] {
        let encoder = JSONCoding.encoder()
        return Array(try encoder.encode(JSONValue.object(["keys": .array([try privateKey.jwk(kid: keyID)])])))
    }

    /// A caregiver access token as Supabase Auth issues it, signed ES256 with this key.
    func caregiverToken(subject: UUID, expiresIn: Int) throws -> String {
        let now = Date().timeIntervalSince1970.rounded(.down)
        return try JWTSigner.sign(
            claims: Self.claims(subject: subject, issuedAt: now, expiresIn: expiresIn),
            using: .ec(privateKey, kid: keyID))
    }

    /// Supabase's access-token claims for an authenticated, non-anonymous user.
    static func claims(subject: UUID, issuedAt: Double, expiresIn: Int) -> [String: JSONValue] {
        [
            "sub": .string(subject.uuidString.lowercased()), "aud": .string("authenticated"),
            "role": .string("authenticated"), "iat": .number(issuedAt), "exp": .number(issuedAt + Double(expiresIn)),
            "is_anonymous": .bool(false),
        ]
    }
}

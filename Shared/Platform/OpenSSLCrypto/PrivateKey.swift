/// A private key (RSA 2048–8192 bits, P-256, or Ed25519) that signs with the one scheme its kind serves.
///
/// Used for the Google service-account assertion (RS256), the dev tool's caregiver tokens and tests.
/// Not `Sendable`: it owns an OpenSSL handle.
public final class PrivateKey {
    let key: EVPKey
    /// RSA, P-256 or Ed25519.
    public let kind: KeyKind

    private init(key: EVPKey) throws {
        self.kind = try key.kind()
        self.key = key
    }

    /// Reads a PEM private key: PKCS#8 `BEGIN PRIVATE KEY` (what Google service-account JSON carries), or the
    /// traditional `BEGIN RSA PRIVATE KEY` / `BEGIN EC PRIVATE KEY`. Encrypted keys are refused.
    /// The text must contain real line breaks: unescaping `\n` from an environment variable is the caller's job.
    /// - Throws: ``CryptoError`` — `invalidKey` when no key can be read; `unsupportedKey` for another type or
    ///   curve; `weakKey` for an RSA key outside 2048–8192 bits.
    public convenience init(pem: String) throws {
        try self.init(key: EVPKey.privateKey(pem: pem))
    }

    /// Generates a fresh RSA key.
    /// - Parameter bits: modulus size, 2048 through 8192.
    /// - Throws: ``CryptoError`` `invalidArgument` for a size out of range, or an OpenSSL failure.
    public static func generateRSA(bits: Int = 2048) throws -> PrivateKey {
        try PrivateKey(key: EVPKey.generateRSA(bits: bits))
    }

    /// Generates a fresh P-256 key.
    /// - Throws: ``CryptoError`` on an OpenSSL failure.
    public static func generateP256() throws -> PrivateKey {
        try PrivateKey(key: EVPKey.generateP256())
    }

    /// Generates a fresh Ed25519 key.
    /// - Throws: ``CryptoError`` on an OpenSSL failure.
    public static func generateEd25519() throws -> PrivateKey {
        try PrivateKey(key: EVPKey.generateEd25519())
    }

    /// The key as unencrypted PKCS#8 PEM (`BEGIN PRIVATE KEY`). This is secret material: never log it.
    public func pemPKCS8() throws -> String {
        try key.privateKeyPEM()
    }

    /// The matching public key, as an independent object holding no private material.
    public func publicKey() throws -> PublicKey {
        try PublicKey(validating: EVPKey.publicKey(der: key.publicKeyDER()))
    }

    /// The matching public key as `BEGIN PUBLIC KEY` PEM.
    public func publicKeyPEM() throws -> String {
        try key.publicKeyPEM()
    }

    /// Signs `message` with the one scheme this key's kind serves.
    /// - Returns: RSA: the PKCS#1 v1.5 SHA-256 signature (modulus length); P-256: 64 bytes R‖S (not DER);
    ///   Ed25519: the 64-byte signature.
    /// - Throws: ``CryptoError`` on an OpenSSL failure.
    public func sign(message: [UInt8]) throws -> [UInt8] {
        let signature = try key.digestSign(message)
        switch kind {
        case .rsa, .ed25519: return signature
        case .ecP256: return try ECDSASignature.raw(fromDER: signature)
        }
    }
}

/// A public key (RSA 2048–8192 bits, P-256, or Ed25519) that verifies signatures of the one scheme its kind serves.
///
/// JOSE (`JOSE`) adds JWK import/export and the algorithm check on top. Not `Sendable`: it owns an OpenSSL handle; build one per owner.
public final class PublicKey {
    let key: EVPKey
    /// RSA, P-256 or Ed25519.
    public let kind: KeyKind

    /// Wraps an imported key after checking its type, size and OpenSSL's public-key validation.
    init(validating key: EVPKey) throws {
        self.kind = try key.kind()
        try key.checkPublicKey()
        self.key = key
    }

    /// An RSA public key from its big-endian modulus and exponent (a JWK's `n` and `e`).
    /// - Throws: ``CryptoError`` — `weakKey` for a modulus under 2048 bits; `invalidKey` when OpenSSL refuses it.
    public convenience init(rsaModulus modulus: [UInt8], exponent: [UInt8]) throws {
        try self.init(validating: EVPKey.rsaPublicKey(modulus: modulus, exponent: exponent))
    }

    /// A P-256 public key from its 32-byte affine coordinates (a JWK's `x` and `y`).
    /// - Throws: ``CryptoError`` `invalidKey` for coordinates that are not 32 bytes or a point not on the curve.
    public convenience init(p256X x: [UInt8], y: [UInt8]) throws {
        try self.init(validating: EVPKey.p256PublicKey(x: x, y: y))
    }

    /// An Ed25519 public key from its 32 raw bytes (RFC 8037 §2, a JWK's `x`).
    /// - Throws: ``CryptoError`` `invalidKey` for another length.
    public convenience init(ed25519Raw raw: [UInt8]) throws {
        try self.init(validating: EVPKey.ed25519PublicKey(raw: raw))
    }

    /// Imports a `BEGIN PUBLIC KEY` (SubjectPublicKeyInfo) PEM block.
    /// - Throws: ``CryptoError`` — `unsupportedKey` for another type or curve; `weakKey` for a small RSA key.
    public convenience init(pem: String) throws {
        try self.init(validating: EVPKey.publicKey(pem: pem))
    }

    /// Imports DER SubjectPublicKeyInfo.
    /// - Throws: ``CryptoError`` — `unsupportedKey` for another type or curve; `weakKey` for a small RSA key.
    public convenience init(der: [UInt8]) throws {
        try self.init(validating: EVPKey.publicKey(der: der))
    }

    /// Whether `signature` is a valid signature of `message` under this key, with the one scheme its kind serves:
    ///
    /// - RSA: RSASSA-PKCS1-v1_5 with SHA-256.
    /// - P-256: ECDSA with SHA-256, the signature as exactly 64 bytes R‖S (IEEE P1363, as JWS uses it); any other
    ///   length (notably a DER signature) is `false`.
    /// - Ed25519: a 64-byte signature (PureEdDSA).
    public func verify(signature: [UInt8], message: [UInt8]) -> Bool {
        switch kind {
        case .rsa:
            return key.digestVerify(signature: signature, message: message, kind: kind)
        case .ecP256:
            guard signature.count == 2 * ECDSASignature.p256ComponentLength,
                let der = try? ECDSASignature.der(fromRaw: signature)
            else { return false }
            return key.digestVerify(signature: der, message: message, kind: kind)
        case .ed25519:
            guard signature.count == 2 * EVPKey.ed25519KeyLength else { return false }
            return key.digestVerify(signature: signature, message: message, kind: kind)
        }
    }

    /// An RSA key's big-endian modulus and exponent.
    /// - Throws: ``CryptoError`` `invalidArgument` for another kind, or when OpenSSL cannot export them.
    public func rsaParameters() throws -> (modulus: [UInt8], exponent: [UInt8]) {
        guard kind == .rsa else { throw CryptoError(.invalidArgument, operation: "RSA parameters of \(kind)") }
        return (try key.bigNumberParameter("n"), try key.bigNumberParameter("e"))
    }

    /// A P-256 key's affine coordinates, 32 bytes each.
    /// - Throws: ``CryptoError`` `invalidArgument` for another kind, or when OpenSSL cannot export them.
    public func p256Coordinates() throws -> (x: [UInt8], y: [UInt8]) {
        guard kind == .ecP256 else { throw CryptoError(.invalidArgument, operation: "P-256 point of \(kind)") }
        let width = ECDSASignature.p256ComponentLength
        return (try key.bigNumberParameter("qx", width: width), try key.bigNumberParameter("qy", width: width))
    }

    /// An Ed25519 key's 32 raw bytes.
    /// - Throws: ``CryptoError`` `invalidArgument` for another kind, or when OpenSSL cannot export them.
    public func ed25519Raw() throws -> [UInt8] {
        guard kind == .ed25519 else { throw CryptoError(.invalidArgument, operation: "Ed25519 bytes of \(kind)") }
        return try key.rawPublicKey()
    }

    /// The key as `BEGIN PUBLIC KEY` PEM.
    public func pem() throws -> String {
        try key.publicKeyPEM()
    }

    /// The key as DER SubjectPublicKeyInfo.
    public func der() throws -> [UInt8] {
        try key.publicKeyDER()
    }
}

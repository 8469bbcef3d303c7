/// A public key (RSA 2048–8192 bits, P-256, or Ed25519) that verifies RS256, ES256 or EdDSA signatures.
///
/// A key serves exactly one algorithm, ``KeyKind/signingAlgorithm``: the caller says which algorithm it expects
/// and a mismatch is simply "does not verify". Not `Sendable`: it owns an OpenSSL handle; build one per owner.
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

    /// Imports a public JWK (RFC 7517/7518): `{"kty":"RSA","n":…,"e":…}` or
    /// `{"kty":"EC","crv":"P-256","x":…,"y":…}` or `{"kty":"OKP","crv":"Ed25519","x":…}` (RFC 8037) with strict
    /// unpadded base64url values. Other members
    /// (`kid`, `alg`, `use`) are the caller's business, see ``JWKS``.
    /// - Throws: ``CryptoError`` — `unsupportedKey` for another `kty` or curve; `weakKey` for an RSA modulus under
    ///   2048 bits; `invalidKey` for missing or badly encoded members, coordinates (or an Ed25519 key) that are not
    ///   32 bytes, or a point that is not on the curve.
    public convenience init(jwk: JSONValue) throws {
        guard let type = jwk["kty"]?.stringValue else { throw CryptoError(.invalidKey, operation: "JWK kty") }
        switch type {
        case "RSA":
            let modulus = try Self.base64URLMember("n", of: jwk)
            let exponent = try Self.base64URLMember("e", of: jwk)
            try self.init(validating: EVPKey.rsaPublicKey(modulus: modulus, exponent: exponent))
        case "EC":
            guard let curve = jwk["crv"]?.stringValue else {
                throw CryptoError(.invalidKey, operation: "JWK crv")
            }
            guard curve == "P-256" else { throw CryptoError(.unsupportedKey, operation: "JWK crv") }
            let x = try Self.base64URLMember("x", of: jwk)
            let y = try Self.base64URLMember("y", of: jwk)
            try self.init(validating: EVPKey.p256PublicKey(x: x, y: y))
        case "OKP":
            guard let curve = jwk["crv"]?.stringValue else {
                throw CryptoError(.invalidKey, operation: "JWK crv")
            }
            guard curve == "Ed25519" else { throw CryptoError(.unsupportedKey, operation: "JWK crv") }
            let x = try Self.base64URLMember("x", of: jwk)
            try self.init(validating: EVPKey.ed25519PublicKey(raw: x))
        default:
            throw CryptoError(.unsupportedKey, operation: "JWK kty")
        }
    }

    /// Imports a `BEGIN PUBLIC KEY` (SubjectPublicKeyInfo) PEM block.
    /// - Throws: ``CryptoError`` as for ``init(jwk:)``.
    public convenience init(pem: String) throws {
        try self.init(validating: EVPKey.publicKey(pem: pem))
    }

    /// Imports DER SubjectPublicKeyInfo.
    /// - Throws: ``CryptoError`` as for ``init(jwk:)``.
    public convenience init(der: [UInt8]) throws {
        try self.init(validating: EVPKey.publicKey(der: der))
    }

    private static func base64URLMember(_ name: String, of jwk: JSONValue) throws -> [UInt8] {
        guard let text = jwk[name]?.stringValue, let bytes = Base64URL.decode(text), !bytes.isEmpty else {
            throw CryptoError(.invalidKey, operation: "JWK member \(name)")
        }
        return bytes
    }

    /// Whether `signature` is a valid JWS signature of `message` under this key with `algorithm`.
    ///
    /// - RS256: RSASSA-PKCS1-v1_5 with SHA-256.
    /// - ES256: the JWS form, exactly 64 bytes R‖S; any other length (notably a DER signature) is `false`.
    /// - EdDSA: a 64-byte Ed25519 signature (RFC 8037 §3.1).
    /// - An algorithm this key does not serve (HS256, or RS256 on an EC key) is `false`.
    public func verify(signature: [UInt8], message: [UInt8], algorithm: JWTAlgorithm) -> Bool {
        guard algorithm == kind.signingAlgorithm else { return false }
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

    /// The key as a public JWK: `kty`, `kid`, `alg` (RS256/ES256/EdDSA), `use: sig`, and `n`/`e`, `crv`/`x`/`y`
    /// or (OKP) `crv`/`x`.
    /// - Parameter kid: the key id to publish it under.
    /// - Throws: ``CryptoError`` when OpenSSL cannot export the parameters.
    public func jwk(kid: String) throws -> JSONValue {
        var members: [String: JSONValue] = [
            "kid": .string(kid),
            "alg": .string(kind.signingAlgorithm.rawValue),
            "use": .string("sig"),
        ]
        switch kind {
        case .rsa:
            members["kty"] = .string("RSA")
            members["n"] = .string(Base64URL.encode(try key.bigNumberParameter("n")))
            members["e"] = .string(Base64URL.encode(try key.bigNumberParameter("e")))
        case .ecP256:
            let width = ECDSASignature.p256ComponentLength
            members["kty"] = .string("EC")
            members["crv"] = .string("P-256")
            members["x"] = .string(Base64URL.encode(try key.bigNumberParameter("qx", width: width)))
            members["y"] = .string(Base64URL.encode(try key.bigNumberParameter("qy", width: width)))
        case .ed25519:
            members["kty"] = .string("OKP")
            members["crv"] = .string("Ed25519")
            members["x"] = .string(Base64URL.encode(try key.rawPublicKey()))
        }
        return .object(members)
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

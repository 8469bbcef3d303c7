import Codecs
import OpenSSLCrypto

extension KeyKind {
    /// The JWS algorithm a key of this kind is used with; a key never serves two algorithms.
    public var signingAlgorithm: JWTAlgorithm {
        switch self {
        case .rsa: .rs256
        case .ecP256: .es256
        case .ed25519: .edDSA
        }
    }
}

extension PublicKey {
    /// Imports a public JWK (RFC 7517/7518): `{"kty":"RSA","n":…,"e":…}` or
    /// `{"kty":"EC","crv":"P-256","x":…,"y":…}` or `{"kty":"OKP","crv":"Ed25519","x":…}` (RFC 8037) with strict
    /// unpadded base64url values. Other members (`kid`, `alg`, `use`) are the caller's business, see ``JWKS``.
    /// - Throws: ``CryptoError`` — `unsupportedKey` for another `kty` or curve; `weakKey` for an RSA modulus under
    ///   2048 bits; `invalidKey` for missing or badly encoded members, coordinates (or an Ed25519 key) that are not
    ///   32 bytes, or a point that is not on the curve.
    public convenience init(jwk: JSONValue) throws {
        guard let type = jwk["kty"]?.stringValue else { throw CryptoError(.invalidKey, operation: "JWK kty") }
        switch type {
        case "RSA":
            try self.init(
                rsaModulus: try Self.base64URLMember("n", of: jwk), exponent: Self.base64URLMember("e", of: jwk))
        case "EC":
            try Self.requireCurve("P-256", of: jwk)
            try self.init(p256X: try Self.base64URLMember("x", of: jwk), y: Self.base64URLMember("y", of: jwk))
        case "OKP":
            try Self.requireCurve("Ed25519", of: jwk)
            try self.init(ed25519Raw: try Self.base64URLMember("x", of: jwk))
        default:
            throw CryptoError(.unsupportedKey, operation: "JWK kty")
        }
    }

    private static func requireCurve(_ expected: String, of jwk: JSONValue) throws {
        guard let curve = jwk["crv"]?.stringValue else { throw CryptoError(.invalidKey, operation: "JWK crv") }
        guard curve == expected else { throw CryptoError(.unsupportedKey, operation: "JWK crv") }
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
        algorithm == kind.signingAlgorithm && verify(signature: signature, message: message)
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
            let (modulus, exponent) = try rsaParameters()
            members["kty"] = .string("RSA")
            members["n"] = .string(Base64URL.encode(modulus))
            members["e"] = .string(Base64URL.encode(exponent))
        case .ecP256:
            let (x, y) = try p256Coordinates()
            members["kty"] = .string("EC")
            members["crv"] = .string("P-256")
            members["x"] = .string(Base64URL.encode(x))
            members["y"] = .string(Base64URL.encode(y))
        case .ed25519:
            members["kty"] = .string("OKP")
            members["crv"] = .string("Ed25519")
            members["x"] = .string(Base64URL.encode(try ed25519Raw()))
        }
        return .object(members)
    }
}

extension PrivateKey {
    /// The matching public key as a JWK with `kid`, `kty`, `alg`, `use: sig` (see ``PublicKey/jwk(kid:)``).
    public func jwk(kid: String) throws -> JSONValue {
        try publicKey().jwk(kid: kid)
    }

    /// Signs `message` for a JWS.
    /// - Parameters:
    ///   - message: the signing input (for a JWT, the ASCII bytes of `header.payload`).
    ///   - algorithm: must be this key's ``KeyKind/signingAlgorithm``.
    /// - Returns: RS256: the PKCS#1 v1.5 signature (modulus length); ES256: 64 bytes R‖S (not DER); EdDSA: the
    ///   64-byte Ed25519 signature.
    /// - Throws: ``CryptoError`` `algorithmMismatch` for another algorithm, or an OpenSSL failure.
    public func sign(message: [UInt8], algorithm: JWTAlgorithm) throws -> [UInt8] {
        guard algorithm == kind.signingAlgorithm else {
            throw CryptoError(.algorithmMismatch, operation: "sign \(algorithm.rawValue)")
        }
        return try sign(message: message)
    }
}

import COpenSSL

/// Creating keys (import from JWK parts, DER, PEM; generation) and exporting them (PEM, DER).
extension EVPKey {
    /// `SubjectPublicKeyInfo` DER up to the EC point, for id-ecPublicKey on prime256v1 (RFC 5480).
    private static let p256PublicKeyInfoPrefix: [UInt8] = [
        0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01,
        0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
    ]

    /// An RSA public key from its modulus and public exponent (big-endian), via `EVP_PKEY_fromdata`.
    /// - Throws: ``CryptoError`` `invalidKey` when OpenSSL does not accept the parts.
    static func rsaPublicKey(modulus: [UInt8], exponent: [UInt8]) throws -> EVPKey {
        let n = try BigNumber(bigEndian: modulus)
        let e = try BigNumber(bigEndian: exponent)
        guard let builder = OSSL_PARAM_BLD_new() else { throw CryptoError.openSSL("OSSL_PARAM_BLD_new") }
        defer { OSSL_PARAM_BLD_free(builder) }
        // The builder records the name and BIGNUM pointers and copies the values only in OSSL_PARAM_BLD_to_param,
        // so the names are static C strings and both numbers are kept alive until then.
        let parameters = try withExtendedLifetime((n, e)) { () throws -> UnsafeMutablePointer<OSSL_PARAM> in
            let pushedN = n.withHandle { OSSL_PARAM_BLD_push_BN(builder, StaticCString.rsaModulus, $0) }
            try requireOne(pushedN, "OSSL_PARAM_BLD_push_BN")
            let pushedE = e.withHandle { OSSL_PARAM_BLD_push_BN(builder, StaticCString.rsaExponent, $0) }
            try requireOne(pushedE, "OSSL_PARAM_BLD_push_BN")
            guard let parameters = OSSL_PARAM_BLD_to_param(builder) else {
                throw CryptoError.openSSL("OSSL_PARAM_BLD_to_param")
            }
            return parameters
        }
        defer { OSSL_PARAM_free(parameters) }

        guard let context = EVP_PKEY_CTX_new_from_name(nil, StaticCString.rsa, nil) else {
            throw CryptoError.openSSL("EVP_PKEY_CTX_new_from_name")
        }
        defer { EVP_PKEY_CTX_free(context) }
        try requireOne(EVP_PKEY_fromdata_init(context), "EVP_PKEY_fromdata_init")
        var key: OpaquePointer?
        // EVP_PKEY_PUBLIC_KEY, spelled out because Swift does not import that nested macro.
        let selection =
            OSSL_KEYMGMT_SELECT_PUBLIC_KEY | OSSL_KEYMGMT_SELECT_DOMAIN_PARAMETERS
            | OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS
        let imported = EVP_PKEY_fromdata(context, &key, Int32(selection), parameters)
        // On failure OpenSSL frees what it allocated and leaves `key` NULL.
        guard imported == 1, let key else { throw CryptoError.openSSL("EVP_PKEY_fromdata", code: .invalidKey) }
        return EVPKey(taking: key)
    }

    /// A P-256 public key from its affine coordinates (32 bytes each, big-endian). OpenSSL rejects a point that
    /// is not on the curve while decoding it.
    /// - Throws: ``CryptoError`` `invalidKey` for wrong lengths or a point OpenSSL does not accept.
    static func p256PublicKey(x: [UInt8], y: [UInt8]) throws -> EVPKey {
        let width = ECDSASignature.p256ComponentLength
        guard x.count == width, y.count == width else { throw CryptoError(.invalidKey, operation: "EC point") }
        return try publicKey(der: p256PublicKeyInfoPrefix + [0x04] + x + y)
    }

    /// An Ed25519 public key from its 32 raw bytes (RFC 8037 §2, the JWK's `x`).
    /// - Throws: ``CryptoError`` `invalidKey` for another length or bytes OpenSSL does not accept.
    static func ed25519PublicKey(raw: [UInt8]) throws -> EVPKey {
        guard raw.count == ed25519KeyLength else { throw CryptoError(.invalidKey, operation: "Ed25519 key") }
        let key = raw.withUnsafeBufferPointer { buffer in
            EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, buffer.baseAddress, buffer.count)
        }
        guard let key else { throw CryptoError.openSSL("EVP_PKEY_new_raw_public_key", code: .invalidKey) }
        return EVPKey(taking: key)
    }

    /// The length of an Ed25519 public key and of each half of its signature.
    static let ed25519KeyLength = 32

    /// The raw public key bytes (for Ed25519, the JWK's `x`).
    func rawPublicKey() throws -> [UInt8] {
        var length = 0
        try withHandle { try requireOne(EVP_PKEY_get_raw_public_key($0, nil, &length), "EVP_PKEY_get_raw_public_key") }
        var bytes = [UInt8](repeating: 0, count: length)
        let result = bytes.withUnsafeMutableBufferPointer { buffer in
            withHandle { EVP_PKEY_get_raw_public_key($0, buffer.baseAddress, &length) }
        }
        try requireOne(result, "EVP_PKEY_get_raw_public_key")
        guard length <= bytes.count else {
            throw CryptoError(.libraryFailure, operation: "EVP_PKEY_get_raw_public_key")
        }
        return Array(bytes[..<length])
    }

    /// A public key from DER `SubjectPublicKeyInfo`; the whole input must be one structure.
    /// - Throws: ``CryptoError`` `invalidKey` when OpenSSL cannot decode it.
    static func publicKey(der: [UInt8]) throws -> EVPKey {
        var consumed = 0
        let key: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            let decoded = d2i_PUBKEY(nil, &cursor, buffer.count)
            if let cursor, let start = buffer.baseAddress { consumed = cursor - start }
            return decoded
        }
        guard let key else { throw CryptoError.openSSL("d2i_PUBKEY", code: .invalidKey) }
        let owned = EVPKey(taking: key)
        guard consumed == der.count else { throw CryptoError(.invalidKey, operation: "d2i_PUBKEY") }
        return owned
    }

    /// A public key from a `BEGIN PUBLIC KEY` PEM block.
    /// - Throws: ``CryptoError`` `invalidKey` when there is no such block or it does not decode.
    static func publicKey(pem: String) throws -> EVPKey {
        let stream = try MemoryBIO(contents: Array(pem.utf8))
        let key = stream.withHandle { PEM_read_bio_PUBKEY($0, nil, nil, nil) }
        guard let key else { throw CryptoError.openSSL("PEM_read_bio_PUBKEY", code: .invalidKey) }
        return EVPKey(taking: key)
    }

    /// A private key from PEM: PKCS#8 `BEGIN PRIVATE KEY`, or the traditional `BEGIN RSA PRIVATE KEY` /
    /// `BEGIN EC PRIVATE KEY`. Encrypted keys are refused (no pass phrase is ever asked for).
    /// - Throws: ``CryptoError`` `invalidKey` when no private key can be read.
    static func privateKey(pem: String) throws -> EVPKey {
        let stream = try MemoryBIO(contents: Array(pem.utf8))
        // A NULL callback would make OpenSSL prompt on the terminal for an encrypted key; this one refuses.
        let key = stream.withHandle { PEM_read_bio_PrivateKey($0, nil, { _, _, _, _ in 0 }, nil) }
        guard let key else { throw CryptoError.openSSL("PEM_read_bio_PrivateKey", code: .invalidKey) }
        return EVPKey(taking: key)
    }

    /// A fresh RSA key pair.
    /// - Throws: ``CryptoError`` `invalidArgument` for a size outside ``RSAKeyPolicy``, or an OpenSSL failure.
    static func generateRSA(bits: Int) throws -> EVPKey {
        guard bits >= RSAKeyPolicy.minimumBits, bits <= RSAKeyPolicy.maximumBits else {
            throw CryptoError(.invalidArgument, operation: "EVP_RSA_gen")
        }
        guard let key = copenssl_generate_rsa(UInt32(bits)) else { throw CryptoError.openSSL("EVP_RSA_gen") }
        return EVPKey(taking: key)
    }

    /// A fresh P-256 key pair.
    /// - Throws: ``CryptoError`` when OpenSSL fails.
    static func generateP256() throws -> EVPKey {
        guard let key = copenssl_generate_ec(StaticCString.p256) else { throw CryptoError.openSSL("EVP_EC_gen") }
        return EVPKey(taking: key)
    }

    /// A fresh Ed25519 key pair (through a key-generation context: `EVP_PKEY_Q_keygen` is variadic).
    /// - Throws: ``CryptoError`` when OpenSSL fails.
    static func generateEd25519() throws -> EVPKey {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, StaticCString.ed25519, nil) else {
            throw CryptoError.openSSL("EVP_PKEY_CTX_new_from_name")
        }
        defer { EVP_PKEY_CTX_free(context) }
        try requireOne(EVP_PKEY_keygen_init(context), "EVP_PKEY_keygen_init")
        var key: OpaquePointer?
        guard EVP_PKEY_generate(context, &key) == 1, let key else { throw CryptoError.openSSL("EVP_PKEY_generate") }
        return EVPKey(taking: key)
    }

    /// The private key as unencrypted PKCS#8 PEM (`BEGIN PRIVATE KEY`).
    func privateKeyPEM() throws -> String {
        let stream = try MemoryBIO()
        try stream.withHandle { bio in
            try withHandle { key in
                try requireOne(
                    PEM_write_bio_PKCS8PrivateKey(bio, key, nil, nil, 0, nil, nil), "PEM_write_bio_PKCS8PrivateKey")
            }
        }
        return try stream.readAllText()
    }

    /// The public key as `SubjectPublicKeyInfo` PEM (`BEGIN PUBLIC KEY`).
    func publicKeyPEM() throws -> String {
        let stream = try MemoryBIO()
        try stream.withHandle { bio in
            try withHandle { key in try requireOne(PEM_write_bio_PUBKEY(bio, key), "PEM_write_bio_PUBKEY") }
        }
        return try stream.readAllText()
    }

    /// The public key as DER `SubjectPublicKeyInfo`.
    func publicKeyDER() throws -> [UInt8] {
        let length = withHandle { i2d_PUBKEY($0, nil) }
        guard length > 0 else { throw CryptoError.openSSL("i2d_PUBKEY") }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return withHandle { i2d_PUBKEY($0, &cursor) }
        }
        guard written == length else { throw CryptoError.openSSL("i2d_PUBKEY") }
        return der
    }
}

/// NUL-terminated names with static lifetime, for OpenSSL calls that keep the pointer after returning
/// (`OSSL_PARAM_BLD_push_*` until `OSSL_PARAM_BLD_to_param`, `EVP_PKEY_CTX_new_from_name` for the context's
/// life). A Swift `String` passed as `const char *` is only valid during the call.
private enum StaticCString {
    static var rsa: UnsafePointer<CChar> { pointer(to: "RSA") }
    static var p256: UnsafePointer<CChar> { pointer(to: "P-256") }
    static var ed25519: UnsafePointer<CChar> { pointer(to: "ED25519") }
    static var rsaModulus: UnsafePointer<CChar> { pointer(to: "n") }  // OSSL_PKEY_PARAM_RSA_N
    static var rsaExponent: UnsafePointer<CChar> { pointer(to: "e") }  // OSSL_PKEY_PARAM_RSA_E

    private static func pointer(to literal: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(literal.utf8Start).assumingMemoryBound(to: CChar.self)
    }
}

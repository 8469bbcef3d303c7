import COpenSSL

/// The kinds of asymmetric key this project signs and verifies with.
public enum KeyKind: Sendable, Equatable {
    /// RSA, 2048 to 8192 bits, used with RS256 (RSASSA-PKCS1-v1_5 with SHA-256).
    case rsa
    /// ECDSA on NIST P-256, used with ES256.
    case ecP256
    /// Ed25519 (RFC 8037), used with EdDSA.
    case ed25519

    /// The digest OpenSSL's `EVP_Digest{Sign,Verify}Init_ex` is given: SHA-256, or none for Ed25519, which
    /// hashes the message itself (PureEdDSA) and must be used one-shot.
    var digestName: String? {
        switch self {
        case .rsa, .ecP256: "SHA256"
        case .ed25519: nil
        }
    }
}

/// Sole owner of one OpenSSL `EVP_PKEY`; ``PublicKey`` and ``PrivateKey`` are the public faces of it.
///
/// Internal: everything that touches the handle lives in this file and `EVPKey+Encoding.swift`.
final class EVPKey {
    private let handle: OpaquePointer

    /// Takes ownership of `handle`; it is freed exactly once, when this object goes away.
    init(taking handle: OpaquePointer) {
        self.handle = handle
    }

    deinit {
        EVP_PKEY_free(handle)
    }

    /// Lends the handle to an OpenSSL call; it must not be kept after `body` returns.
    func withHandle<Result>(_ body: (OpaquePointer) throws -> Result) rethrows -> Result {
        try body(handle)
    }

    /// What kind of key this is.
    /// - Throws: ``CryptoError`` `unsupportedKey` for anything but RSA, P-256 and Ed25519 (RSA-PSS, Ed448, P-384…),
    ///   `weakKey` for an RSA modulus outside ``RSAKeyPolicy``.
    func kind() throws -> KeyKind {
        if EVP_PKEY_is_a(handle, "RSA") == 1 {
            let bits = Int(EVP_PKEY_get_bits(handle))
            guard bits >= RSAKeyPolicy.minimumBits, bits <= RSAKeyPolicy.maximumBits else {
                throw CryptoError(.weakKey, operation: "EVP_PKEY_get_bits")
            }
            return .rsa
        }
        if EVP_PKEY_is_a(handle, "EC") == 1 {
            guard try groupName() == "prime256v1" else {
                throw CryptoError(.unsupportedKey, operation: "EVP_PKEY_get_group_name")
            }
            return .ecP256
        }
        if EVP_PKEY_is_a(handle, "ED25519") == 1 {
            return .ed25519
        }
        OpenSSLErrorQueue.clear()
        throw CryptoError(.unsupportedKey, operation: "EVP_PKEY_is_a")
    }

    private func groupName() throws -> String {
        var name = [CChar](repeating: 0, count: 80)
        var length = 0
        let result = name.withUnsafeMutableBufferPointer { buffer in
            EVP_PKEY_get_group_name(handle, buffer.baseAddress, buffer.count, &length)
        }
        try requireOne(result, "EVP_PKEY_get_group_name", code: .invalidKey)
        guard length < name.count else { throw CryptoError(.invalidKey, operation: "EVP_PKEY_get_group_name") }
        return String(decoding: name[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A big-number parameter of the key (`"n"`, `"e"`, `"qx"`, `"qy"`…) as big-endian bytes, minimal or
    /// left-padded to `width`.
    func bigNumberParameter(_ name: String, width: Int? = nil) throws -> [UInt8] {
        var number: OpaquePointer?
        let result = EVP_PKEY_get_bn_param(handle, name, &number)
        guard result == 1, let number else {
            BN_free(number)
            throw CryptoError.openSSL("EVP_PKEY_get_bn_param")
        }
        return try BigNumber(taking: number).bytes(width: width)
    }

    /// Runs OpenSSL's public-key validation: for EC that the point is on the curve and not the identity, for
    /// RSA that the modulus is odd and composite and the exponent odd and at least 65537.
    /// - Throws: ``CryptoError`` `invalidKey` when the check fails.
    func checkPublicKey() throws {
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, handle, nil) else {
            throw CryptoError.openSSL("EVP_PKEY_CTX_new_from_pkey")
        }
        defer { EVP_PKEY_CTX_free(context) }
        try requireOne(EVP_PKEY_public_check(context), "EVP_PKEY_public_check", code: .invalidKey)
    }

    /// Signs `message` with the key's scheme: SHA-256 and PKCS#1 v1.5 for RSA, SHA-256 and DER-encoded ECDSA for
    /// EC, Ed25519 (64 bytes) for Ed25519.
    /// - Throws: ``CryptoError`` when OpenSSL fails (e.g. the key has no private part).
    func digestSign(_ message: [UInt8]) throws -> [UInt8] {
        let digest = try kind().digestName
        guard let context = EVP_MD_CTX_new() else { throw CryptoError.openSSL("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        try requireOne(
            EVP_DigestSignInit_ex(context, nil, digest, nil, nil, handle, nil), "EVP_DigestSignInit_ex")
        var length = 0
        let sized = message.withUnsafeBufferPointer { input in
            EVP_DigestSign(context, nil, &length, input.baseAddress, input.count)
        }
        try requireOne(sized, "EVP_DigestSign")
        var signature = [UInt8](repeating: 0, count: length)
        let signed = signature.withUnsafeMutableBufferPointer { output in
            message.withUnsafeBufferPointer { input in
                EVP_DigestSign(context, output.baseAddress, &length, input.baseAddress, input.count)
            }
        }
        try requireOne(signed, "EVP_DigestSign")
        guard length <= signature.count else { throw CryptoError(.libraryFailure, operation: "EVP_DigestSign") }
        return Array(signature[..<length])
    }

    /// Whether `signature` (DER for EC) is a valid signature of `message` under this key: SHA-256 for RSA and EC,
    /// Ed25519 for Ed25519 (`kind` says which; a NULL digest lets OpenSSL use the key's own scheme).
    /// Any failure, including a malformed signature, is `false`; OpenSSL's error queue is left empty.
    func digestVerify(signature: [UInt8], message: [UInt8], kind: KeyKind) -> Bool {
        guard let context = EVP_MD_CTX_new() else {
            OpenSSLErrorQueue.clear()
            return false
        }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit_ex(context, nil, kind.digestName, nil, nil, handle, nil) == 1 else {
            OpenSSLErrorQueue.clear()
            return false
        }
        let result = signature.withUnsafeBufferPointer { signatureBuffer in
            message.withUnsafeBufferPointer { input in
                EVP_DigestVerify(
                    context, signatureBuffer.baseAddress, signatureBuffer.count, input.baseAddress, input.count)
            }
        }
        // 0 is "does not verify", a negative value "could not be checked"; both are a rejection.
        guard result == 1 else {
            OpenSSLErrorQueue.clear()
            return false
        }
        return true
    }
}

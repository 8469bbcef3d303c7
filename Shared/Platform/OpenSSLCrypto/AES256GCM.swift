import COpenSSL

/// AES-256-GCM (NIST SP 800-38D) through OpenSSL's EVP cipher interface: authenticated encryption of small values
/// kept where others can read them (the shared FCM access token in the database).
///
/// A sealed box is `nonce (12 bytes) ‖ ciphertext ‖ tag (16 bytes)`, with a fresh random nonce per seal. Opening
/// checks the tag over the ciphertext and the associated data before anything is returned: a box sealed under another
/// key, with other associated data, or altered in any byte, does not open.
public enum AES256GCM {
    public static let keyLength = 32
    public static let nonceLength = 12
    public static let tagLength = 16

    /// Seals `plaintext` under `key`, binding `associatedData` (authenticated, not encrypted).
    /// - Throws: ``CryptoError`` `invalidArgument` for a key that is not 32 bytes, `libraryFailure` when OpenSSL fails.
    public static func seal(_ plaintext: [UInt8], key: [UInt8], associatedData: [UInt8]) throws -> [UInt8] {
        guard key.count == keyLength else { throw CryptoError(.invalidArgument, operation: "AES-256-GCM key") }
        let nonce = try SecureRandom.bytes(nonceLength)
        let context = try CipherContext()
        try requireOne(EVP_EncryptInit_ex(context.pointer, EVP_aes_256_gcm(), nil, key, nonce), "EVP_EncryptInit_ex")
        try context.authenticate(associatedData, encrypt: true)
        var ciphertext = try context.transform(plaintext, encrypt: true)
        var length: Int32 = 0
        var tail = [UInt8](repeating: 0, count: 16)
        try requireOne(EVP_EncryptFinal_ex(context.pointer, &tail, &length), "EVP_EncryptFinal_ex")
        ciphertext += tail.prefix(Int(length))
        var tag = [UInt8](repeating: 0, count: tagLength)
        try requireOne(
            EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_AEAD_GET_TAG, Int32(tagLength), &tag), "EVP_CTRL_GCM_GET_TAG")
        return nonce + ciphertext + tag
    }

    /// Opens a box made by ``seal(_:key:associatedData:)`` under the same key and associated data.
    /// - Returns: the plaintext, or `nil` when the box does not open (wrong key or data, altered, or too short):
    ///   an expected answer for a value someone else may have written, not an error.
    /// - Throws: ``CryptoError`` `invalidArgument` for a key that is not 32 bytes, `libraryFailure` when OpenSSL fails.
    public static func open(_ box: [UInt8], key: [UInt8], associatedData: [UInt8]) throws -> [UInt8]? {
        guard key.count == keyLength else { throw CryptoError(.invalidArgument, operation: "AES-256-GCM key") }
        guard box.count >= nonceLength + tagLength else { return nil }
        let nonce = Array(box.prefix(nonceLength))
        let ciphertext = Array(box.dropFirst(nonceLength).dropLast(tagLength))
        var tag = Array(box.suffix(tagLength))
        let context = try CipherContext()
        try requireOne(EVP_DecryptInit_ex(context.pointer, EVP_aes_256_gcm(), nil, key, nonce), "EVP_DecryptInit_ex")
        try context.authenticate(associatedData, encrypt: false)
        var plaintext = try context.transform(ciphertext, encrypt: false)
        try requireOne(
            EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_AEAD_SET_TAG, Int32(tagLength), &tag), "EVP_CTRL_GCM_SET_TAG")
        var length: Int32 = 0
        var tail = [UInt8](repeating: 0, count: 16)
        guard EVP_DecryptFinal_ex(context.pointer, &tail, &length) == 1 else {
            OpenSSLErrorQueue.clear()
            return nil
        }
        plaintext += tail.prefix(Int(length))
        return plaintext
    }
}

/// One `EVP_CIPHER_CTX`, freed with its owner.
private final class CipherContext {
    let pointer: OpaquePointer

    init() throws {
        guard let pointer = EVP_CIPHER_CTX_new() else { throw CryptoError.openSSL("EVP_CIPHER_CTX_new") }
        self.pointer = pointer
    }

    deinit { EVP_CIPHER_CTX_free(pointer) }

    /// Feeds associated data (authenticated, not encrypted) to the cipher.
    func authenticate(_ data: [UInt8], encrypt: Bool) throws {
        guard !data.isEmpty else { return }
        try requireLength(data)
        var length: Int32 = 0
        let result = data.withUnsafeBufferPointer { source in
            encrypt
                ? EVP_EncryptUpdate(pointer, nil, &length, source.baseAddress, Int32(source.count))
                : EVP_DecryptUpdate(pointer, nil, &length, source.baseAddress, Int32(source.count))
        }
        try requireOne(result, encrypt ? "EVP_EncryptUpdate" : "EVP_DecryptUpdate")
    }

    /// Encrypts or decrypts `input`; GCM is a stream mode, so the output has the input's length.
    func transform(_ input: [UInt8], encrypt: Bool) throws -> [UInt8] {
        guard !input.isEmpty else { return [] }
        try requireLength(input)
        var output = [UInt8](repeating: 0, count: input.count + 16)
        var length: Int32 = 0
        let result = input.withUnsafeBufferPointer { source in
            output.withUnsafeMutableBufferPointer { target in
                encrypt
                    ? EVP_EncryptUpdate(pointer, target.baseAddress, &length, source.baseAddress, Int32(source.count))
                    : EVP_DecryptUpdate(pointer, target.baseAddress, &length, source.baseAddress, Int32(source.count))
            }
        }
        try requireOne(result, encrypt ? "EVP_EncryptUpdate" : "EVP_DecryptUpdate")
        return Array(output.prefix(Int(length)))
    }

    private func requireLength(_ bytes: [UInt8]) throws {
        guard bytes.count <= Int(Int32.max) - 16 else { throw CryptoError(.invalidArgument, operation: "AES-256-GCM") }
    }
}

/// HKDF with HMAC-SHA-256 (RFC 5869), extract then expand, for keys of at most 32 bytes.
public enum HKDFSHA256 {
    /// A `length`-byte key (1…32) derived from `inputKeyMaterial`.
    public static func deriveKey(
        inputKeyMaterial: [UInt8], salt: [UInt8], info: [UInt8], length: Int = 32
    ) -> [UInt8] {
        precondition((1...HMACSHA256.codeLength).contains(length), "HKDFSHA256 derives 1 to 32 bytes")
        let pseudorandomKey = HMACSHA256.authenticationCode(key: salt, message: inputKeyMaterial)
        return Array(HMACSHA256.authenticationCode(key: pseudorandomKey, message: info + [1]).prefix(length))
    }
}

import COpenSSL

/// HMAC-SHA-256 (RFC 2104) through OpenSSL's one-shot `HMAC()`.
public enum HMACSHA256 {
    /// The length of an authentication code in bytes.
    public static let codeLength = 32

    /// The HMAC-SHA-256 of `message` under `key`.
    ///
    /// Like ``SHA256/hash(_:)`` this does not throw: the one-shot call fails only when the OpenSSL default
    /// provider is unusable or memory is exhausted, and that traps. Compare codes with
    /// ``constantTimeEquals(_:_:)``, never with `==`.
    /// - Parameters:
    ///   - key: the secret key, any length (an empty key is valid HMAC, but never configure one).
    ///   - message: the authenticated bytes.
    /// - Returns: the 32-byte code.
    public static func authenticationCode(key: [UInt8], message: [UInt8]) -> [UInt8] {
        guard key.count <= Int(Int32.max) else { preconditionFailure("HMAC key longer than 2 GiB") }
        // HMAC_Init_ex reads a NULL key as "keep the previous key"; give an empty key a real address instead.
        let keyBytes = key.isEmpty ? [0] : key
        var code = [UInt8](repeating: 0, count: codeLength)
        var written: UInt32 = 0
        let succeeded = keyBytes.withUnsafeBytes { keyBuffer in
            message.withUnsafeBufferPointer { input in
                code.withUnsafeMutableBufferPointer { output in
                    HMAC(
                        EVP_sha256(), keyBuffer.baseAddress, Int32(key.count), input.baseAddress, input.count,
                        output.baseAddress, &written) != nil
                }
            }
        }
        guard succeeded, written == UInt32(codeLength) else {
            OpenSSLErrorQueue.clear()
            preconditionFailure("HMAC(SHA-256) failed: the OpenSSL default provider is unusable")
        }
        return code
    }
}

/// Compares two byte strings in time that depends only on their length, not on where they differ.
///
/// Use this for MACs and other secrets so that a caller cannot learn a correct prefix from response times.
/// - Returns: `false` when the lengths differ (lengths are not secret here: MACs have a fixed length);
///   otherwise whether every byte is equal, decided by `CRYPTO_memcmp`.
public func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    guard !a.isEmpty else { return true }
    return a.withUnsafeBytes { left in
        b.withUnsafeBytes { right in
            CRYPTO_memcmp(left.baseAddress, right.baseAddress, left.count) == 0
        }
    }
}

import COpenSSL

/// HMAC-SHA-256 (RFC 2104) over OpenSSL's low-level SHA-256 (`copenssl_hmac_sha256` in Shared/Platform/C/COpenSSL).
///
/// Not OpenSSL's `HMAC()`: that goes through EVP, whose first use in a process loads OpenSSL's configuration and
/// default provider, about a million instructions a cold function would pay for one token check.
public enum HMACSHA256 {
    /// The length of an authentication code in bytes.
    public static let codeLength = 32

    /// The HMAC-SHA-256 of `message` under `key`.
    ///
    /// Like ``SHA256/hash(_:)`` this does not throw: nothing in it can fail. Compare codes with
    /// ``constantTimeEquals(_:_:)``, never with `==`.
    /// - Parameters:
    ///   - key: the secret key, any length (an empty key is valid HMAC, but never configure one).
    ///   - message: the authenticated bytes.
    /// - Returns: the 32-byte code.
    public static func authenticationCode(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var code = [UInt8](repeating: 0, count: codeLength)
        key.withUnsafeBufferPointer { keyBuffer in
            message.withUnsafeBufferPointer { input in
                code.withUnsafeMutableBufferPointer { output in
                    copenssl_hmac_sha256(
                        keyBuffer.baseAddress, keyBuffer.count, input.baseAddress, input.count, output.baseAddress)
                }
            }
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

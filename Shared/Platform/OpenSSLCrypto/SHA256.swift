import Codecs
import COpenSSL

/// SHA-256 (FIPS 180-4) over OpenSSL's low-level SHA-256 (`copenssl_sha256` in Shared/Platform/C/COpenSSL): not
/// `EVP_Digest`, whose first use in a process loads OpenSSL's configuration and default provider.
public enum SHA256 {
    /// The length of a digest in bytes.
    public static let digestLength = 32

    /// The SHA-256 digest of `bytes`.
    ///
    /// This does not throw: nothing in it can fail.
    /// - Parameter bytes: the message.
    /// - Returns: the 32-byte digest.
    public static func hash(_ bytes: some Collection<UInt8>) -> [UInt8] {
        let message = Array(bytes)
        var digest = [UInt8](repeating: 0, count: digestLength)
        message.withUnsafeBufferPointer { input in
            digest.withUnsafeMutableBufferPointer { output in
                copenssl_sha256(input.baseAddress, input.count, output.baseAddress)
            }
        }
        return digest
    }

    /// The first `length` lower-case hex characters of the SHA-256 of `string`'s UTF-8 bytes.
    ///
    /// Use this to correlate a token or device identifier in logs without logging it.
    /// - Parameters:
    ///   - string: the secret or identifier.
    ///   - length: how many hex characters to keep, clamped to 0...64.
    public static func hexPrefix(of string: String, length: Int = 12) -> String {
        let digest = hash(Array(string.utf8))
        let characters = min(max(length, 0), digestLength * 2)
        return String(Hex.encode(digest).prefix(characters))
    }
}

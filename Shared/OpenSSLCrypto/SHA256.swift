import Codecs
import COpenSSL

/// SHA-256 (FIPS 180-4) through OpenSSL's one-shot `EVP_Digest`.
public enum SHA256 {
    /// The length of a digest in bytes.
    public static let digestLength = 32

    /// The SHA-256 digest of `bytes`.
    ///
    /// This does not throw: OpenSSL's one-shot digest fails only when the default provider cannot be loaded
    /// or memory is exhausted, and then the process cannot do anything useful, so that case traps instead
    /// of making every caller (hashing a patient session token, logging a token prefix) handle it.
    /// - Parameter bytes: the message.
    /// - Returns: the 32-byte digest.
    public static func hash(_ bytes: some Collection<UInt8>) -> [UInt8] {
        let message = Array(bytes)
        var digest = [UInt8](repeating: 0, count: digestLength)
        var written: UInt32 = 0
        let result = message.withUnsafeBytes { input in
            digest.withUnsafeMutableBufferPointer { output in
                EVP_Digest(input.baseAddress, input.count, output.baseAddress, &written, EVP_sha256(), nil)
            }
        }
        guard result == 1, written == UInt32(digestLength) else {
            OpenSSLErrorQueue.clear()
            preconditionFailure("EVP_Digest(SHA-256) failed: the OpenSSL default provider is unusable")
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

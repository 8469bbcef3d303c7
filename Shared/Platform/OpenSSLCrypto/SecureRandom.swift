import COpenSSL

/// Cryptographically secure random bytes from OpenSSL's default DRBG (`RAND_bytes`).
public enum SecureRandom {
    /// Returns `count` random bytes, for session tokens, nonces and test keys.
    /// - Parameter count: how many bytes, 0 through `Int32.max`.
    /// - Throws: ``CryptoError`` with code `invalidArgument` for a count out of range, `libraryFailure` when the
    ///   generator is not seeded or fails (never a silent weak fallback).
    public static func bytes(_ count: Int) throws -> [UInt8] {
        guard count >= 0, count <= Int(Int32.max) else {
            throw CryptoError(.invalidArgument, operation: "RAND_bytes")
        }
        guard count > 0 else { return [] }
        var output = [UInt8](repeating: 0, count: count)
        let result = output.withUnsafeMutableBufferPointer { buffer in
            RAND_bytes(buffer.baseAddress, Int32(buffer.count))
        }
        try requireOne(result, "RAND_bytes")
        return output
    }
}

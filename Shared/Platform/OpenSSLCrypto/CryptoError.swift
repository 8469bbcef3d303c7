import COpenSSL

/// A failure in the OpenSSL binding or in key material handed to it.
///
/// Like postgres-nio's `PSQLError`, the description is deliberately generic: it names what kind of failure
/// happened and which step failed (a constant string chosen by this module), never key bytes, PEM text,
/// tokens or secrets. OpenSSL's own reason text, which describes the failure and not the data, is kept in
/// ``debugDescription`` for logs.
public struct CryptoError: Error, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    public enum Code: String, Sendable {
        /// An OpenSSL call reported failure (allocation, provider, encoding…).
        case libraryFailure = "crypto library failure"
        /// Key material that does not parse, or fails OpenSSL's validation (e.g. an EC point not on the curve).
        case invalidKey = "invalid key"
        /// A well-formed key of a type or curve this project does not use.
        case unsupportedKey = "unsupported key type"
        /// An RSA key shorter than ``RSAKeyPolicy/minimumBits`` or longer than ``RSAKeyPolicy/maximumBits``.
        case weakKey = "RSA key size out of range"
        /// An algorithm that the key cannot produce (e.g. ES256 with an RSA key).
        case algorithmMismatch = "algorithm does not match the key"
        /// A caller-supplied value out of range (a negative byte count, a bit size too small).
        case invalidArgument = "invalid argument"
    }

    public let code: Code
    /// The step that failed, e.g. `"EVP_DigestSign"`. A constant string, never data.
    public let operation: String
    /// OpenSSL's reason string for the first queued error, when there was one. Describes the failure, not data.
    public let libraryReason: String?

    public init(_ code: Code, operation: String, libraryReason: String? = nil) {
        self.code = code
        self.operation = operation
        self.libraryReason = libraryReason
    }

    public var description: String { "\(code.rawValue) (\(operation))" }

    public var debugDescription: String {
        guard let libraryReason else { return description }
        return "\(description): \(libraryReason)"
    }

    /// An error for a failed OpenSSL call. Drains OpenSSL's thread-local error queue so that a stale entry can
    /// never be mistaken for the cause of a later failure on the same thread.
    static func openSSL(_ operation: String, code: Code = .libraryFailure) -> CryptoError {
        CryptoError(code, operation: operation, libraryReason: OpenSSLErrorQueue.drain())
    }
}

/// OpenSSL's per-thread error queue.
enum OpenSSLErrorQueue {
    /// Returns the reason string of the oldest queued error (if any) and empties the queue.
    static func drain() -> String? {
        let first = ERR_get_error()
        ERR_clear_error()
        guard first != 0, let reason = ERR_reason_error_string(first) else { return nil }
        return String(cString: reason)
    }

    /// Empties the queue after a call whose failure is an expected answer (a signature that does not verify).
    static func clear() {
        ERR_clear_error()
    }
}

/// Checks the `1 means success` convention used by most OpenSSL calls.
/// - Throws: ``CryptoError`` naming `operation` when `result` is not 1.
@inline(__always)
func requireOne(_ result: Int32, _ operation: String, code: CryptoError.Code = .libraryFailure) throws {
    guard result == 1 else { throw CryptoError.openSSL(operation, code: code) }
}

/// The RSA key sizes this project accepts, for verification keys (JWKS) and signing keys (service accounts).
public enum RSAKeyPolicy {
    /// Smaller moduli are rejected: 2048 bits is the floor of current guidance (NIST SP 800-131A).
    public static let minimumBits = 2048
    /// Larger moduli are rejected so that a configured key cannot make every verification expensive.
    public static let maximumBits = 8192
}

import Codecs
import OpenSSLCrypto
import FoundationEssentials

/// A patient's opaque session token: `pst_` followed by 43 base64url characters (32 random bytes).
///
/// The database keeps only the SHA-256 of the whole token text, so a leaked table does not grant access, and a
/// token is found by hashing and looking the hash up — never by comparing secrets with `==`.
public struct PatientSessionToken: Sendable {
    public static let prefix = "pst_"
    /// The token as given to the patient's app. Never log it.
    public let text: String

    /// Accepts only the exact shape; anything else is not a patient token.
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count == 4 + 43, text.hasPrefix(Self.prefix),
            bytes.dropFirst(4).allSatisfy(Self.isBase64URLCharacter)
        else { return nil }
        self.text = text
    }

    private init(trusted text: String) {
        self.text = text
    }

    /// A new random token. - Throws: when the system's random source fails.
    public static func generate() throws -> PatientSessionToken {
        PatientSessionToken(trusted: prefix + Base64URL.encode(try SecureRandom.bytes(32)))
    }

    /// What the database stores and looks up.
    public var hash: [UInt8] { SHA256.hash(Array(text.utf8)) }

    static func isBase64URLCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default: false
        }
    }
}

/// A JSON Web Key Set (RFC 7517 §5) of verification keys, looked up by `kid`, e.g. `SUPABASE_JWKS`.
///
/// Each accepted key has exactly one algorithm, taken from its type (RSA → RS256, EC P-256 → ES256), never
/// from a token. Parsing rules:
/// - keys of other types (`oct`, `OKP`, …), EC keys on other curves, and keys whose `use` is not `sig` are
///   skipped: they can never verify a token, and a key set may legitimately carry them;
/// - every other key needs a non-empty string `kid`, unique in the set;
/// - an `alg` member, when present, must be the key's own algorithm (an RSA key marked `ES256` or `PS256`, or an
///   EC key marked `RS256`, makes the whole set an error: the publisher and this service disagree on it);
/// - key material must import (RSA 2048–8192 bits; EC point on the curve).
///
/// Not `Sendable`: it holds ``PublicKey``s, which own OpenSSL handles.
public struct JWKS {
    /// One verification key of the set.
    public struct Key {
        /// The `kid` tokens name it by.
        public let id: String
        /// The only algorithm this key verifies.
        public let algorithm: JWTAlgorithm
        /// The imported public key.
        public let publicKey: PublicKey
    }

    private let keysByID: [String: Key]

    /// Parses a key set from its JSON text, `{"keys":[…]}`.
    /// - Throws: ``JWKSError`` for invalid JSON (duplicate member names included), a missing `keys` array, or a
    ///   supported key that breaks one of the rules above.
    public init(json: String) throws {
        let document: JSONValue
        do {
            document = try JSONValue.parse(json)
        } catch {
            throw JWKSError(.malformedJSON)
        }
        try self.init(document: document)
    }

    /// Parses a key set from an already parsed document.
    /// - Throws: ``JWKSError`` as for ``init(json:)``.
    public init(document: JSONValue) throws {
        guard let entries = document["keys"]?.arrayValue else { throw JWKSError(.notAKeySet) }
        var keysByID: [String: Key] = [:]
        for (index, entry) in entries.enumerated() {
            guard let key = try Self.key(from: entry, index: index) else { continue }
            guard keysByID.updateValue(key, forKey: key.id) == nil else {
                throw JWKSError(.duplicateKeyID, keyIndex: index)
            }
        }
        self.keysByID = keysByID
    }

    /// The key a token's `kid` names, or `nil` when the set has no such key.
    public func key(id: String) -> Key? {
        keysByID[id]
    }

    /// The ids of all accepted keys, sorted (for a start-up log line).
    public var keyIDs: [String] {
        keysByID.keys.sorted()
    }

    /// Whether no key was accepted.
    public var isEmpty: Bool {
        keysByID.isEmpty
    }

    /// The accepted key for one `keys` entry, `nil` when the entry is skipped.
    private static func key(from entry: JSONValue, index: Int) throws -> Key? {
        guard entry.objectValue != nil, let type = entry["kty"]?.stringValue else {
            throw JWKSError(.malformedKey, keyIndex: index)
        }
        let algorithm: JWTAlgorithm
        switch type {
        case "RSA":
            algorithm = .rs256
        case "EC":
            guard let curve = entry["crv"]?.stringValue else { throw JWKSError(.malformedKey, keyIndex: index) }
            guard curve == "P-256" else { return nil }
            algorithm = .es256
        default:
            return nil
        }
        if let use = entry["use"] {
            guard let use = use.stringValue else { throw JWKSError(.malformedKey, keyIndex: index) }
            guard use == "sig" else { return nil }
        }
        guard let id = entry["kid"]?.stringValue, !id.isEmpty else {
            throw JWKSError(.missingKeyID, keyIndex: index)
        }
        if let declared = entry["alg"] {
            guard declared.stringValue == algorithm.rawValue else {
                throw JWKSError(.algorithmMismatch, keyIndex: index)
            }
        }
        let publicKey: PublicKey
        do {
            publicKey = try PublicKey(jwk: entry)
        } catch {
            throw JWKSError(.invalidKey, keyIndex: index)
        }
        return Key(id: id, algorithm: algorithm, publicKey: publicKey)
    }
}

/// Why a key set was not accepted. The description names the rule and the position of the key in `keys`,
/// never key material.
public struct JWKSError: Error, Equatable, CustomStringConvertible {
    public enum Reason: String, Sendable {
        case malformedJSON
        case notAKeySet
        case malformedKey
        case missingKeyID
        case duplicateKeyID
        case algorithmMismatch
        case invalidKey
    }

    public let reason: Reason
    /// The zero-based position of the offending entry in `keys`, when one entry is to blame.
    public let keyIndex: Int?

    public init(_ reason: Reason, keyIndex: Int? = nil) {
        self.reason = reason
        self.keyIndex = keyIndex
    }

    public var description: String {
        guard let keyIndex else { return "JWKS rejected: \(reason.rawValue)" }
        return "JWKS rejected: \(reason.rawValue) at keys[\(keyIndex)]"
    }
}

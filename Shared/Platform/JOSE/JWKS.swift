import Codecs
import OpenSSLCrypto
import Logging

/// A JSON Web Key Set (RFC 7517 §5) of verification keys, looked up by `kid`: `SUPABASE_JWKS`, or the document
/// fetched from `SUPABASE_JWKS_URL`.
///
/// Each accepted key has exactly one algorithm, taken from its type (RSA → RS256, EC P-256 → ES256, OKP Ed25519 →
/// EdDSA), never from a token. Only a document that is not a key set at all (bad JSON, duplicate member names, no
/// `keys` array) is an error. A key the verifier cannot use is skipped and listed in ``skippedKeys`` (for one
/// warning each), and never takes the other keys down: a published set may carry keys for other consumers, and
/// Supabase adds new key types over time. Skipped are:
/// - entries that are not objects or have no string `kty`; other types (`oct`, …) and curves (P-384, X25519, …);
/// - keys whose `use` is not `sig`;
/// - keys without a non-empty string `kid`;
/// - keys whose `alg`, when present, is not the key's own algorithm (an Ed25519 key marked `ES256`, an RSA key
///   marked `PS256`): the publisher and this service disagree on how the key signs, so it signs nothing here;
/// - key material that does not import (RSA under 2048 or over 8192 bits; an EC point off the curve; an Ed25519
///   key that is not 32 bytes);
/// - every key of a `kid` that appears more than once: which of them signed a token cannot be known, so neither
///   is trusted (Supabase never publishes duplicates).
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
        /// The key's RFC 7638 thumbprint: SHA-256 over its required members in canonical JSON, base64url. What a
        /// pin names (``keeping(thumbprints:)``): unlike the `kid`, whoever publishes a key cannot choose it.
        public let thumbprint: String
    }

    /// A `keys` entry that was not accepted. Carries its position and `kid`, never key material.
    public struct SkippedKey: Sendable, Equatable {
        /// Why (an `Error` only so that it can be a `Result`'s failure).
        public enum Reason: String, Sendable, Error {
            /// Not an object, or `kty`/`crv`/`use`/`alg` of the wrong JSON type.
            case malformedKey
            /// A key type or curve with no algorithm here (`oct`, P-384, X25519…).
            case unsupportedKey
            /// `use` is not `sig` (an encryption key).
            case notForSigning
            /// No non-empty string `kid`.
            case missingKeyID
            /// `alg` is not the algorithm of the key's type.
            case algorithmMismatch
            /// An RSA modulus outside 2048–8192 bits.
            case weakKey
            /// Key material that does not import or validate.
            case invalidKey
            /// Another entry has the same `kid`.
            case duplicateKeyID
        }

        /// The zero-based position of the entry in `keys`.
        public let index: Int
        /// The entry's `kid`, when it has a string one.
        public let id: String?
        public let reason: Reason
    }

    private let keysByID: [String: Key]
    /// The entries that were skipped, in document order.
    public let skippedKeys: [SkippedKey]

    /// Parses a key set from its JSON text, `{"keys":[…]}`.
    /// - Throws: ``JWKSError`` for invalid JSON (duplicate member names included) or a missing `keys` array.
    public init(json: String) throws(JWKSError) {
        let document: JSONValue
        do {
            document = try JSONValue.parse(json)
        } catch {
            throw JWKSError(.malformedJSON)
        }
        try self.init(document: document)
    }

    /// Parses a key set from an already parsed document.
    /// - Throws: ``JWKSError`` `notAKeySet` when it has no `keys` array.
    public init(document: JSONValue) throws(JWKSError) {
        guard let entries = document["keys"]?.arrayValue else { throw JWKSError(.notAKeySet) }
        var candidates: [(index: Int, key: Key)] = []
        var skipped: [SkippedKey] = []
        for (index, entry) in entries.enumerated() {
            switch Self.parseKey(entry) {
            case .success(let key):
                candidates.append((index, key))
            case .failure(let reason):
                skipped.append(SkippedKey(index: index, id: Self.keyID(of: entry), reason: reason))
            }
        }
        let counts = Dictionary(candidates.map { ($0.key.id, 1) }, uniquingKeysWith: +)
        var keysByID: [String: Key] = [:]
        for (index, key) in candidates {
            if counts[key.id] == 1 {
                keysByID[key.id] = key
            } else {
                skipped.append(SkippedKey(index: index, id: key.id, reason: .duplicateKeyID))
            }
        }
        self.keysByID = keysByID
        self.skippedKeys = skipped.sorted { $0.index < $1.index }
    }

    private init(keysByID: [String: Key], skippedKeys: [SkippedKey]) {
        self.keysByID = keysByID
        self.skippedKeys = skippedKeys
    }

    /// The set with only the keys whose ``Key/thumbprint`` is among `thumbprints`; the others are left out (and
    /// their ids returned), whatever the document that published them says.
    public func keeping(thumbprints: Set<String>) -> (keys: JWKS, left: [String]) {
        let kept = keysByID.filter { thumbprints.contains($0.value.thumbprint) }
        let left = keysByID.keys.filter { kept[$0] == nil }.sorted()
        return (JWKS(keysByID: kept, skippedKeys: skippedKeys), left)
    }

    /// The RFC 7638 thumbprint of a key entry, from its required members (all strings here, so the canonical JSON
    /// is the members in name order, without whitespace).
    static func thumbprint(of entry: JSONValue, type: String) -> String? {
        let names =
            switch type {
            case "RSA": ["e", "kty", "n"]
            case "EC": ["crv", "kty", "x", "y"]
            default: ["crv", "kty", "x"]
            }
        var members: [String] = []
        for name in names {
            guard let value = entry[name]?.stringValue,
                value.utf8.allSatisfy({
                    $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\")
                })
            else { return nil }
            members.append("\"\(name)\":\"\(value)\"")
        }
        return Base64URL.encode(SHA256.hash(Array(("{" + members.joined(separator: ",") + "}").utf8)))
    }

    /// The key a token's `kid` names, or `nil` when the set has no such key.
    public func key(id: String) -> Key? {
        keysByID[id]
    }

    /// The ids of all accepted keys, sorted (for a log line).
    public var keyIDs: [String] {
        keysByID.keys.sorted()
    }

    /// Whether no key was accepted.
    public var isEmpty: Bool {
        keysByID.isEmpty
    }

    /// Logs one warning per skipped key: its position, `kid` and reason, never key material.
    /// - Parameter source: the variable the set came from (`SUPABASE_JWKS`, `SUPABASE_JWKS_URL`).
    public func logSkippedKeys(_ logger: Logger, source: String) {
        for key in skippedKeys {
            var metadata: Logger.Metadata = [
                "config.variable": .string(source), "jwks.index": .stringConvertible(key.index),
                "jwks.reason": .string(key.reason.rawValue),
            ]
            if let id = key.id { metadata["jwks.kid"] = .string(String(id.prefix(64))) }
            logger.warning("signing key skipped", metadata: metadata)
        }
    }

    private static func keyID(of entry: JSONValue) -> String? {
        guard let id = entry["kid"]?.stringValue, !id.isEmpty else { return nil }
        return id
    }

    /// The accepted key for one `keys` entry, or why it is skipped.
    private static func parseKey(_ entry: JSONValue) -> Result<Key, SkippedKey.Reason> {
        guard entry.objectValue != nil, let type = entry["kty"]?.stringValue else { return .failure(.malformedKey) }
        let algorithm: JWTAlgorithm
        switch type {
        case "RSA":
            algorithm = .rs256
        case "EC", "OKP":
            guard let curve = entry["crv"]?.stringValue else { return .failure(.malformedKey) }
            switch (type, curve) {
            case ("EC", "P-256"): algorithm = .es256
            case ("OKP", "Ed25519"): algorithm = .edDSA
            default: return .failure(.unsupportedKey)
            }
        default:
            return .failure(.unsupportedKey)
        }
        if let use = entry["use"] {
            guard let use = use.stringValue else { return .failure(.malformedKey) }
            guard use == "sig" else { return .failure(.notForSigning) }
        }
        guard let id = keyID(of: entry) else { return .failure(.missingKeyID) }
        if let declared = entry["alg"] {
            guard declared.stringValue == algorithm.rawValue else { return .failure(.algorithmMismatch) }
        }
        guard let thumbprint = thumbprint(of: entry, type: type) else { return .failure(.malformedKey) }
        do {
            return .success(
                Key(id: id, algorithm: algorithm, publicKey: try PublicKey(jwk: entry), thumbprint: thumbprint))
        } catch let error as CryptoError where error.code == .weakKey {
            return .failure(.weakKey)
        } catch {
            return .failure(.invalidKey)
        }
    }
}

/// A document that is not a key set at all. The description names the rule, never the document.
public struct JWKSError: Error, Equatable, CustomStringConvertible {
    public enum Reason: String, Sendable {
        /// Not JSON, or a JSON object with a member name twice.
        case malformedJSON
        /// No `keys` array.
        case notAKeySet
    }

    public let reason: Reason

    public init(_ reason: Reason) {
        self.reason = reason
    }

    public var description: String { "JWKS rejected: \(reason.rawValue)" }
}

import Codecs
import FoundationEssentials
import JOSE
import OpenSSLCrypto

/// Verifies Supabase Auth access tokens (JWS compact serialisation) and extracts the caregiver's identity.
///
/// The algorithm comes from the key, never from the token: a header `kid` that names a ``JWKS`` key selects it
/// (RS256, ES256 or EdDSA) — from the configured set first, then from the set fetched for this token; otherwise an HS256 token is checked against the HS256 secret — with or without a `kid`, as
/// Supabase Auth itself does (supabase/auth#2072: legacy-secret tokens may carry a `kid` of their own) — and any
/// other token is refused as `unknownKey`. The header's `alg` must then equal that key's algorithm exactly,
/// so neither `none` nor an HS256 token "signed" with a public key's bytes can pass. Checks run cheapest
/// first: length and alphabet before any decoding, structure and base64url before JSON, the header before the
/// signature, and the claims only after the signature verified.
///
/// Not `Sendable`: it holds ``PublicKey``s, which own OpenSSL handles.
public final class CaregiverTokenVerifier {
    /// Longest accepted token, in bytes (8 KiB).
    public static let maximumTokenLength = 8192
    /// Allowed clock difference for `exp`, `nbf` and `iat`.
    public static let leeway: TimeInterval = 30
    /// The longest a caregiver token may live: Supabase's own maximum for its JWT expiry setting (one week; its
    /// default is an hour). A later `exp` is refused (`tooLongLived`), so a token signed by a leaked secret or key
    /// cannot be made to outlive the leak's rotation by years.
    public static let maximumLifetime: TimeInterval = 7 * 24 * 3600

    private enum VerificationKey {
        case secret([UInt8])
        case jwk(JWKS.Key)

        var algorithm: JWTAlgorithm {
            switch self {
            case .secret: .hs256
            case .jwk(let key): key.algorithm
            }
        }
    }

    private let hs256Secret: [UInt8]?
    private let jwks: JWKS?
    private let audience: String
    private let issuer: String?

    /// - Parameters:
    ///   - hs256Secret: the bytes of `SUPABASE_JWT_SECRET` (its UTF-8, as Supabase uses it), or `nil`. An empty
    ///     secret counts as none: it would let anyone mint tokens.
    ///   - jwks: the parsed `SUPABASE_JWKS`, or `nil` (the `SUPABASE_JWKS_URL` set is given per token, see
    ///     ``verify(_:now:fetchedKeys:)``).
    ///   - audience: the value `aud` must be or contain.
    ///   - issuer: when set, `iss` must equal it exactly.
    public init(hs256Secret: [UInt8]?, jwks: JWKS?, audience: String = "authenticated", issuer: String?) {
        self.hs256Secret = hs256Secret.flatMap { $0.isEmpty ? nil : $0 }
        self.jwks = jwks
        self.audience = audience
        self.issuer = issuer
    }

    /// Whether the configured (`SUPABASE_JWKS`) set has a key with this `kid`.
    public func hasConfiguredKey(id: String) -> Bool {
        jwks?.key(id: id) != nil
    }

    /// Verifies `token` and returns whose it is.
    /// - Parameters:
    ///   - token: the text after `Bearer `.
    ///   - now: the current time (injected for tests).
    ///   - fetchedKeys: the `SUPABASE_JWKS_URL` key set, when the token names a key the configured set lacks.
    /// - Throws: ``TokenRejection`` naming the first rule the token broke.
    public func verify(_ token: String, now: Date, fetchedKeys: JWKS? = nil) throws(TokenRejection)
        -> CaregiverIdentity
    {
        let segments = try Self.segments(of: token)
        let header = try Self.parseObject(segments.header, maxDepth: 8)
        let key = try selectKey(header: header, fetchedKeys: fetchedKeys)
        guard signatureIsValid(segments.signature, signingInput: segments.signingInput, key: key) else {
            throw TokenRejection(.badSignature)
        }
        let claims = try Self.parseObject(segments.payload, maxDepth: 32)
        return try checkClaims(claims, now: now)
    }

    /// What a token's header asks for, read with the same checks as ``verify(_:now:fetchedKeys:)`` up to the
    /// header (length, alphabet, structure, base64url, strict JSON) and nothing more: whether a key set must be
    /// fetched is decided from it before the signature is checked.
    public struct Header: Sendable, Equatable {
        /// The header's `alg`, as written.
        public let algorithm: String
        /// The header's `kid`, when it has one.
        public let keyID: String?

        /// The asymmetric algorithm the header names (RS256, ES256, EdDSA); `nil` for HS256, `none` and the rest.
        public var asymmetricAlgorithm: JWTAlgorithm? {
            guard let algorithm = JWTAlgorithm(rawValue: algorithm), algorithm != .hs256 else { return nil }
            return algorithm
        }
    }

    /// Reads `token`'s header.
    /// - Throws: ``TokenRejection`` for a token refused before its header could be read.
    public static func header(of token: String) throws(TokenRejection) -> Header {
        let header = try parseObject(segments(of: token).header, maxDepth: 8)
        guard let algorithm = header["alg"]?.stringValue else { throw TokenRejection(.malformed) }
        guard let keyID = header["kid"] else { return Header(algorithm: algorithm, keyID: nil) }
        guard let text = keyID.stringValue else { throw TokenRejection(.malformed) }
        return Header(algorithm: algorithm, keyID: text)
    }

    private struct Segments {
        let header: [UInt8]
        let payload: [UInt8]
        let signature: [UInt8]
        let signingInput: [UInt8]
    }

    /// Length, alphabet, exactly three non-empty segments, strict base64url — no JSON, no crypto.
    private static func segments(of token: String) throws(TokenRejection) -> Segments {
        let bytes = token.utf8
        guard bytes.count <= maximumTokenLength else { throw TokenRejection(.tooLong) }
        guard bytes.allSatisfy(isTokenCharacter) else { throw TokenRejection(.badAlphabet) }
        let parts = bytes.split(separator: UInt8(ascii: "."), maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ !$0.isEmpty }) else { throw TokenRejection(.malformed) }
        guard let header = Base64URL.decode(Substring(parts[0])),
            let payload = Base64URL.decode(Substring(parts[1])),
            let signature = Base64URL.decode(Substring(parts[2]))
        else { throw TokenRejection(.badEncoding) }
        let signingInput = Array(bytes[parts[0].startIndex..<parts[1].endIndex])
        return Segments(header: header, payload: payload, signature: signature, signingInput: signingInput)
    }

    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
            true
        default:
            false
        }
    }

    /// A JSON object parsed strictly; a duplicate member name is its own rejection.
    private static func parseObject(_ bytes: [UInt8], maxDepth: Int) throws(TokenRejection) -> JSONValue {
        let value: JSONValue
        do {
            value = try JSONValue.parse(bytes, maxDepth: maxDepth)
        } catch {
            throw TokenRejection(error.reason == .duplicateMember ? .duplicateMember : .malformed)
        }
        guard value.objectValue != nil else { throw TokenRejection(.malformed) }
        return value
    }

    /// `alg`, `crit`, then the key named by `kid` (or the secret), whose algorithm `alg` must equal.
    private func selectKey(header: JSONValue, fetchedKeys: JWKS?) throws(TokenRejection) -> VerificationKey {
        guard let algorithm = header["alg"]?.stringValue else { throw TokenRejection(.malformed) }
        guard algorithm.lowercased() != "none" else { throw TokenRejection(.algorithmNone) }
        // No extension is understood, so any `crit` (RFC 7515 §4.1.11) means the token must be refused.
        guard header["crit"] == nil else { throw TokenRejection(.critical) }
        let key: VerificationKey
        let keyID: String?
        if let keyIDMember = header["kid"] {
            guard let text = keyIDMember.stringValue else { throw TokenRejection(.malformed) }
            keyID = text
        } else {
            keyID = nil
        }
        if let keyID, let jwk = jwks?.key(id: keyID) ?? fetchedKeys?.key(id: keyID) {
            key = .jwk(jwk)
        } else if let hs256Secret, algorithm == JWTAlgorithm.hs256.rawValue {
            key = .secret(hs256Secret)
        } else if keyID == nil, let hs256Secret {
            key = .secret(hs256Secret)  // no kid, another alg: refused below as algorithmMismatch
        } else {
            throw TokenRejection(.unknownKey)
        }
        guard algorithm == key.algorithm.rawValue else { throw TokenRejection(.algorithmMismatch) }
        return key
    }

    private func signatureIsValid(_ signature: [UInt8], signingInput: [UInt8], key: VerificationKey) -> Bool {
        switch key {
        case .secret(let secret):
            let expected = HMACSHA256.authenticationCode(key: secret, message: signingInput)
            return constantTimeEquals(expected, signature)
        case .jwk(let jwk):
            return jwk.publicKey.verify(signature: signature, message: signingInput, algorithm: jwk.algorithm)
        }
    }

    /// `exp` (and its distance from now), `iat`, `nbf`, `aud`, `role`, `sub`, `is_anonymous`, `iss`, in that order.
    private func checkClaims(_ claims: JSONValue, now: Date) throws(TokenRejection) -> CaregiverIdentity {
        let currentTime = now.timeIntervalSince1970
        guard let expiryMember = claims["exp"] else { throw TokenRejection(.missingExpiry) }
        guard let expiry = expiryMember.numberValue else { throw TokenRejection(.malformed) }
        guard currentTime <= expiry + Self.leeway else { throw TokenRejection(.expired) }
        guard expiry - currentTime <= Self.maximumLifetime + Self.leeway else { throw TokenRejection(.tooLongLived) }
        if let issuedAtMember = claims["iat"] {
            guard let issuedAt = issuedAtMember.numberValue, issuedAt <= currentTime + Self.leeway else {
                throw TokenRejection(.issuedInFuture)
            }
            guard expiry - issuedAt <= Self.maximumLifetime + Self.leeway else {
                throw TokenRejection(.tooLongLived)
            }
        }
        if let notBeforeMember = claims["nbf"] {
            guard let notBefore = notBeforeMember.numberValue else { throw TokenRejection(.malformed) }
            guard currentTime + Self.leeway >= notBefore else { throw TokenRejection(.notYetValid) }
        }
        guard audienceMatches(claims["aud"]) else { throw TokenRejection(.wrongAudience) }
        guard claims["role"] == .string("authenticated") else { throw TokenRejection(.wrongRole) }
        guard let subject = claims["sub"]?.stringValue, let userID = UUID(exactly: subject) else {
            throw TokenRejection(.badSubject)
        }
        switch claims["is_anonymous"] {
        case nil, .bool(false)?: break
        case .bool(true)?: throw TokenRejection(.anonymous)
        default: throw TokenRejection(.malformed)
        }
        if let issuer {
            guard claims["iss"] == .string(issuer) else { throw TokenRejection(.wrongIssuer) }
        }
        return CaregiverIdentity(userID: userID, expiresAt: Date(timeIntervalSince1970: expiry))
    }

    /// `aud` as a string equal to the audience, or an array of strings containing it (RFC 7519 §4.1.3).
    private func audienceMatches(_ member: JSONValue?) -> Bool {
        switch member {
        case .string(let value)?:
            return value == audience
        case .array(let values)?:
            let strings = values.compactMap(\.stringValue)
            return strings.count == values.count && strings.contains(audience)
        default:
            return false
        }
    }
}

/// A caregiver whose access token verified: the Supabase user id (`sub`) and when the token stops being valid.
public struct CaregiverIdentity: Sendable, Equatable {
    /// The caregiver's id, the token's `sub`.
    public let userID: UUID
    /// The token's `exp` (without the leeway).
    public let expiresAt: Date

    public init(userID: UUID, expiresAt: Date) {
        self.userID = userID
        self.expiresAt = expiresAt
    }
}

/// Why a caregiver token was refused.
///
/// Every case is a 401 for the client, which is never told which rule failed; ``Reason-swift.enum/rawValue`` is
/// meant for a log field (`auth.rejection`). The description never contains the token or any part of it.
public struct TokenRejection: Error, Equatable, CustomStringConvertible {
    /// The rule a token broke. Raw values are stable, machine-readable names.
    public enum Reason: String, Sendable, CaseIterable {
        /// Longer than ``CaregiverTokenVerifier/maximumTokenLength`` bytes.
        case tooLong
        /// A character outside `A–Z a–z 0–9 - _ .`.
        case badAlphabet
        /// Not three non-empty segments, or a header/payload that is not a JSON object, or a member of the wrong
        /// JSON type (`alg`, `kid`, `exp`, `nbf`, `is_anonymous`).
        case malformed
        /// A segment that is not strict unpadded base64url.
        case badEncoding
        /// A JSON member name appearing twice in the header or the claims.
        case duplicateMember
        /// `alg` is `none` in any letter case.
        case algorithmNone
        /// The header has a `crit` member.
        case critical
        /// The header's `kid` names no configured key, or there is no `kid` and no HS256 secret.
        case unknownKey
        /// The header's `alg` is not the algorithm of the selected key.
        case algorithmMismatch
        /// The signature does not verify (including an ES256 signature that is not 64 bytes R‖S).
        case badSignature
        /// No `exp` claim.
        case missingExpiry
        /// `exp` passed more than the leeway ago.
        case expired
        /// `nbf` is more than the leeway in the future.
        case notYetValid
        /// `iat` is more than the leeway in the future, or not a number.
        case issuedInFuture
        /// `exp` lies further ahead than a token may live (``CaregiverTokenVerifier/maximumLifetime``, from now or
        /// from `iat`): a token minted to last for years is no session's.
        case tooLongLived
        /// `aud` missing, or not containing the expected audience.
        case wrongAudience
        /// `iss` differs from the configured issuer.
        case wrongIssuer
        /// `role` is not `authenticated`.
        case wrongRole
        /// `sub` missing or not a UUID.
        case badSubject
        /// `is_anonymous` is `true`: anonymous Supabase users are not caregivers.
        case anonymous
    }

    public let reason: Reason

    public init(reason: Reason) {
        self.reason = reason
    }

    public init(_ reason: Reason) {
        self.reason = reason
    }

    public var description: String { "caregiver token rejected: \(reason.rawValue)" }
}

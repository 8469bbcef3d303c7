import FoundationEssentials

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

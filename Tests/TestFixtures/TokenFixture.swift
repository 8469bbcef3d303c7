import Codecs
import OpenSSLCrypto
import JOSE
import Foundation
import Testing

import CaregiverPush

/// Fresh keys, a JWKS publishing them, and helpers to mint valid and hand-edited caregiver tokens.
public struct TokenFixture {
    public static let rsaKeyID = "rsa-key-1"
    public static let ecKeyID = "ec-key-1"

    public let secret = Array("a-test-only-jwt-secret-of-at-least-32-characters".utf8)
    public let now = Date(timeIntervalSince1970: 1_750_000_000)
    public let userID = UUID(uuidString: "6F9619FF-8B86-D011-B42D-00C04FC964FF")!
    public let rsaKey: PrivateKey
    public let ecKey: PrivateKey
    public let jwks: JWKS

    public init() throws {
        rsaKey = try PrivateKey.generateRSA()
        ecKey = try PrivateKey.generateP256()
        let set = JSONValue.object([
            "keys": .array([try rsaKey.jwk(kid: Self.rsaKeyID), try ecKey.jwk(kid: Self.ecKeyID)])
        ])
        jwks = try JWKS(json: Self.text(set))
    }

    /// A verifier trusting both the HS256 secret and the JWKS.
    public func verifier(issuer: String? = nil) -> CaregiverTokenVerifier {
        CaregiverTokenVerifier(hs256Secret: secret, jwks: jwks, issuer: issuer)
    }

    /// Claims that pass every check at ``now``; `changes` overrides or (with `nil`) removes members.
    public func claims(_ changes: [String: JSONValue?] = [:]) -> [String: JSONValue] {
        var claims: [String: JSONValue] = [
            "sub": .string(userID.uuidString.lowercased()),
            "aud": .string("authenticated"),
            "role": .string("authenticated"),
            "exp": .number(now.timeIntervalSince1970 + 3600),
            "iat": .number(now.timeIntervalSince1970 - 60),
            "iss": .string("https://project.supabase.co/auth/v1"),
            "is_anonymous": .bool(false),
        ]
        for (name, value) in changes { claims[name] = value }
        return claims
    }

    public func hs256(_ claims: [String: JSONValue]? = nil, header: [String: JSONValue] = [:]) throws -> String {
        try JWTSigner.sign(header: header, claims: claims ?? self.claims(), using: .hmac(secret: secret))
    }

    public func rs256(_ claims: [String: JSONValue]? = nil, header: [String: JSONValue] = [:]) throws -> String {
        try JWTSigner.sign(header: header, claims: claims ?? self.claims(), using: .rsa(rsaKey, kid: Self.rsaKeyID))
    }

    public func es256(_ claims: [String: JSONValue]? = nil, header: [String: JSONValue] = [:]) throws -> String {
        try JWTSigner.sign(header: header, claims: claims ?? self.claims(), using: .ec(ecKey, kid: Self.ecKeyID))
    }

    /// A token whose header and payload are exactly the given JSON texts, correctly signed with `key`.
    public func handBuilt(header: String, payload: String, using key: JWTSigningKey) throws -> String {
        try JWTSigner.sign(headerJSON: Array(header.utf8), payloadJSON: Array(payload.utf8), using: key)
    }

    /// Verifies and returns the rejection reason, or `nil` when the token was accepted.
    public func rejection(of token: String, by verifier: CaregiverTokenVerifier? = nil) -> TokenRejection.Reason? {
        do {
            _ = try (verifier ?? self.verifier()).verify(token, now: now)
            return nil
        } catch {
            return error.reason
        }
    }

    public static func text(_ value: JSONValue) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    public static func segments(_ token: String) -> [String] {
        token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    }

    public static func replacing(segment index: Int, of token: String, with replacement: String) -> String {
        var parts = segments(token)
        parts[index] = replacement
        return parts.joined(separator: ".")
    }

    public static func encodedJSON(_ text: String) -> String {
        Base64URL.encode(Array(text.utf8))
    }
}

extension TokenFixture {
    /// An RSA key under 2048 bits, an EC key without `kid`, an `oct` key, an X25519 key.
    public static func unusableKeys() throws -> [JSONValue] {
        var modulus = try SecureRandom.bytes(128)
        modulus[0] |= 0x80
        modulus[127] |= 1
        let weak: JSONValue = .object([
            "kty": .string("RSA"), "kid": .string("rsa-1024"), "n": .string(Base64URL.encode(modulus)),
            "e": .string("AQAB"), "alg": .string("RS256"),
        ])
        guard case .object(var noKid) = try PrivateKey.generateP256().jwk(kid: "x") else { return [] }
        noKid["kid"] = nil
        let oct: JSONValue = .object(["kty": .string("oct"), "kid": .string("hmac"), "k": .string("c2VjcmV0")])
        let x25519: JSONValue = .object([
            "kty": .string("OKP"), "crv": .string("X25519"), "kid": .string("x25519"),
            "x": .string(Base64URL.encode([UInt8](repeating: 9, count: 32))),
        ])
        return [weak, .object(noKid), oct, x25519]
    }
}

@testable import Codecs
@testable import OpenSSLCrypto
@testable import JOSE
import Foundation
import Testing

@testable import CaregiverPush
import TestFixtures

@Suite("caregiver token verifier: accepted tokens")
struct CaregiverTokenAcceptanceTests {
    let fixture: TokenFixture

    init() throws {
        fixture = try TokenFixture()
    }

    @Test("a valid HS256 token yields the caregiver's id and expiry")
    func validHS256() throws {
        let identity = try fixture.verifier().verify(try fixture.hs256(), now: fixture.now)
        #expect(identity == CaregiverIdentity(userID: fixture.userID, expiresAt: fixture.now + 3600))
    }

    @Test("a valid ES256 token from a JWKS key is accepted")
    func validES256() throws {
        let identity = try fixture.verifier().verify(try fixture.es256(), now: fixture.now)
        #expect(identity.userID == fixture.userID)
    }

    @Test("a valid RS256 token from a JWKS key is accepted")
    func validRS256() throws {
        let identity = try fixture.verifier().verify(try fixture.rs256(), now: fixture.now)
        #expect(identity.userID == fixture.userID)
    }

    @Test("a token expired 20 s ago is still accepted within the 30 s leeway")
    func expiryWithinLeeway() throws {
        let token = try fixture.hs256(fixture.claims(["exp": .number(fixture.now.timeIntervalSince1970 - 20)]))
        #expect(fixture.rejection(of: token) == nil)
    }

    @Test("a token whose nbf is 20 s ahead is accepted within the leeway")
    func notBeforeWithinLeeway() throws {
        let token = try fixture.hs256(fixture.claims(["nbf": .number(fixture.now.timeIntervalSince1970 + 20)]))
        #expect(fixture.rejection(of: token) == nil)
    }

    @Test("an aud array containing the audience is accepted")
    func audienceArray() throws {
        let token = try fixture.es256(fixture.claims(["aud": .array([.string("other"), .string("authenticated")])]))
        #expect(fixture.rejection(of: token) == nil)
    }

    @Test("iss is not checked when no issuer is configured")
    func issuerUncheckedWhenNotConfigured() throws {
        let token = try fixture.hs256(fixture.claims(["iss": .string("https://elsewhere.example")]))
        #expect(fixture.rejection(of: token) == nil)
    }

    @Test("the configured issuer is accepted when iss equals it")
    func issuerMatches() throws {
        let verifier = fixture.verifier(issuer: "https://project.supabase.co/auth/v1")
        #expect(fixture.rejection(of: try fixture.rs256(), by: verifier) == nil)
    }

    @Test("is_anonymous false is accepted")
    func notAnonymous() throws {
        #expect(fixture.rejection(of: try fixture.hs256(fixture.claims(["is_anonymous": .bool(false)]))) == nil)
    }
}

@Suite("caregiver token verifier: algorithm and key confusion")
struct CaregiverTokenAlgorithmTests {
    let fixture: TokenFixture

    init() throws {
        fixture = try TokenFixture()
    }

    @Test(
        "alg none in any letter case is rejected with a garbage signature", arguments: ["none", "noNE", "NONE", "None"])
    func algorithmNone(spelling: String) throws {
        let header = TokenFixture.encodedJSON(#"{"alg":"\#(spelling)","typ":"JWT"}"#)
        let payload = TokenFixture.encodedJSON(try TokenFixture.text(.object(fixture.claims())))
        #expect(fixture.rejection(of: "\(header).\(payload).Z2FyYmFnZQ") == .algorithmNone)
    }

    @Test("alg none with an empty signature is rejected before its header is read")
    func algorithmNoneUnsigned() throws {
        let header = TokenFixture.encodedJSON(#"{"alg":"none"}"#)
        let payload = TokenFixture.encodedJSON(try TokenFixture.text(.object(fixture.claims())))
        #expect(fixture.rejection(of: "\(header).\(payload).") == .malformed)
    }

    @Test("HS256 keyed with the RSA public key's PEM and naming the RSA kid is rejected")
    func hmacWithPublicKeyBytes() throws {
        let publicPEM = Array(try fixture.rsaKey.publicKeyPEM().utf8)
        let token = try JWTSigner.sign(
            header: ["kid": .string(TokenFixture.rsaKeyID)], claims: fixture.claims(),
            using: .hmac(secret: publicPEM))
        #expect(fixture.rejection(of: token) == .algorithmMismatch)
        let withoutKeyID = try JWTSigner.sign(claims: fixture.claims(), using: .hmac(secret: publicPEM))
        #expect(fixture.rejection(of: withoutKeyID) == .badSignature)
    }

    @Test("an HS256 token whose kid names a JWKS key is checked against that key and refused")
    func hmacWithJWKSKeyID() throws {
        #expect(
            fixture.rejection(of: try fixture.hs256(header: ["kid": .string(TokenFixture.ecKeyID)]))
                == .algorithmMismatch)
    }

    @Test("an HS256 token with a kid the JWKS does not know falls back to the HS256 secret, as Supabase Auth does")
    func hmacWithForeignKeyID() throws {
        let token = try fixture.hs256(header: ["kid": .string("legacy-secret-kid")])
        #expect(fixture.rejection(of: token) == nil)
        let forged = try JWTSigner.sign(
            header: ["kid": .string("legacy-secret-kid")], claims: fixture.claims(),
            using: .hmac(secret: Array("not-the-secret".utf8)))
        #expect(fixture.rejection(of: forged) == .badSignature)
        let withoutSecret = CaregiverTokenVerifier(hs256Secret: nil, jwks: fixture.jwks, issuer: nil)
        #expect(fixture.rejection(of: token, by: withoutSecret) == .unknownKey)
    }

    @Test("a kid that names no JWKS key is rejected")
    func unknownKeyID() throws {
        let token = try JWTSigner.sign(claims: fixture.claims(), using: .ec(fixture.ecKey, kid: "retired-key"))
        #expect(fixture.rejection(of: token) == .unknownKey)
    }

    @Test("an EdDSA token verifies against an Ed25519 key from the fetched set; its alg must be EdDSA")
    func edDSAFromFetchedKeys() throws {
        let key = try PrivateKey.generateEd25519()
        let fetched = try JWKS(json: TokenFixture.text(.object(["keys": .array([try key.jwk(kid: "ed")])])))
        let token = try JWTSigner.sign(claims: fixture.claims(), using: .ed25519(key, kid: "ed"))
        let verifier = fixture.verifier()
        #expect(try verifier.verify(token, now: fixture.now, fetchedKeys: fetched).userID == fixture.userID)
        #expect(throws: TokenRejection(.unknownKey)) { try verifier.verify(token, now: fixture.now) }
        let header = #"{"alg":"ES256","kid":"ed","typ":"JWT"}"#
        let relabelled = try fixture.handBuilt(
            header: header, payload: TokenFixture.text(.object(fixture.claims())), using: .ed25519(key, kid: nil))
        #expect(throws: TokenRejection(.algorithmMismatch)) {
            try verifier.verify(relabelled, now: fixture.now, fetchedKeys: fetched)
        }
        #expect(try CaregiverTokenVerifier.header(of: token) == .init(algorithm: "EdDSA", keyID: "ed"))
    }

    @Test("a token without kid is rejected when no HS256 secret is configured")
    func noSecretConfigured() throws {
        let verifier = CaregiverTokenVerifier(hs256Secret: nil, jwks: fixture.jwks, issuer: nil)
        #expect(fixture.rejection(of: try fixture.hs256(), by: verifier) == .unknownKey)
        let emptySecret = CaregiverTokenVerifier(hs256Secret: [], jwks: nil, issuer: nil)
        let forged = try JWTSigner.sign(claims: fixture.claims(), using: .hmac(secret: []))
        #expect(fixture.rejection(of: forged, by: emptySecret) == .unknownKey)
    }

    @Test("an alg that differs from the selected key's algorithm is rejected")
    func algorithmMismatch() throws {
        let esHeaderOnRSAKey = TokenFixture.replacing(
            segment: 0, of: try fixture.rs256(),
            with: TokenFixture.encodedJSON(#"{"alg":"ES256","kid":"\#(TokenFixture.rsaKeyID)"}"#))
        #expect(fixture.rejection(of: esHeaderOnRSAKey) == .algorithmMismatch)
        let rs384 = TokenFixture.replacing(
            segment: 0, of: try fixture.rs256(),
            with: TokenFixture.encodedJSON(#"{"alg":"RS384","kid":"\#(TokenFixture.rsaKeyID)"}"#))
        #expect(fixture.rejection(of: rs384) == .algorithmMismatch)
    }

    @Test("an HS256 token signed with another secret is rejected")
    func wrongSecret() throws {
        let token = try JWTSigner.sign(claims: fixture.claims(), using: .hmac(secret: Array("another secret".utf8)))
        #expect(fixture.rejection(of: token) == .badSignature)
    }

    @Test("claims changed after signing are rejected", arguments: ["HS256", "RS256", "ES256"])
    func tamperedClaims(algorithm: String) throws {
        let token =
            switch algorithm {
            case "HS256": try fixture.hs256()
            case "RS256": try fixture.rs256()
            default: try fixture.es256()
            }
        let otherUser = fixture.claims(["sub": .string(UUID().uuidString)])
        let tampered = TokenFixture.replacing(
            segment: 1, of: token, with: TokenFixture.encodedJSON(try TokenFixture.text(.object(otherUser))))
        #expect(fixture.rejection(of: tampered) == .badSignature)
    }

    @Test("an ES256 signature in DER form instead of raw R‖S is rejected")
    func derSignature() throws {
        let token = try fixture.es256()
        let raw = try #require(Base64URL.decode(TokenFixture.segments(token)[2]))
        let der = try ECDSASignature.der(fromRaw: raw)
        #expect(fixture.rejection(of: token) == nil)
        #expect(
            fixture.rejection(of: TokenFixture.replacing(segment: 2, of: token, with: Base64URL.encode(der)))
                == .badSignature)
    }

    @Test("a crit header is rejected even when correctly signed")
    func criticalHeader() throws {
        let token = try fixture.hs256(header: ["crit": .array([.string("exp")]), "exp": .number(1)])
        #expect(fixture.rejection(of: token) == .critical)
    }
}

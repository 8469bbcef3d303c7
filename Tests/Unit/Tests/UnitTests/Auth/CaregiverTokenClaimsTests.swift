@testable import Codecs
import Foundation
import Testing

@testable import CaregiverPush
import TestFixtures

@Suite("caregiver token verifier: claims")
struct CaregiverTokenClaimsTests {
    let fixture: TokenFixture

    init() throws {
        fixture = try TokenFixture()
    }

    private func rejection(changing changes: [String: JSONValue?]) throws -> TokenRejection.Reason? {
        fixture.rejection(of: try fixture.hs256(fixture.claims(changes)))
    }

    @Test("a token expired beyond the leeway is rejected")
    func expired() throws {
        #expect(try rejection(changing: ["exp": .number(fixture.now.timeIntervalSince1970 - 31)]) == .expired)
        #expect(try rejection(changing: ["exp": .number(fixture.now.timeIntervalSince1970 - 3600)]) == .expired)
    }

    @Test("a token without exp, or with a non-numeric exp, is rejected")
    func missingExpiry() throws {
        #expect(try rejection(changing: ["exp": nil]) == .missingExpiry)
        #expect(try rejection(changing: ["exp": .string("9999999999")]) == .malformed)
    }

    @Test("a token meant to live longer than a week, by exp or by exp − iat, or issued in the future, is rejected")
    func lifetime() throws {
        let now = fixture.now.timeIntervalSince1970
        let week = CaregiverTokenVerifier.maximumLifetime
        // The year 5000, and a week and a minute ahead.
        #expect(try rejection(changing: ["exp": .number(95_617_584_000)]) == .tooLongLived)
        #expect(try rejection(changing: ["exp": .number(now + week + 60)]) == .tooLongLived)
        // Issued an hour ago to last eight days: still a week ahead at most, but longer-lived than any session.
        #expect(
            try rejection(changing: ["iat": .number(now - 3600), "exp": .number(now + week - 60)]) == .tooLongLived)
        #expect(try rejection(changing: ["iat": .number(now + 120), "exp": .number(now + 3600)]) == .issuedInFuture)
        #expect(try rejection(changing: ["iat": .string("now")]) == .issuedInFuture)
        // Supabase's longest setting, issued now: accepted.
        #expect(try rejection(changing: ["iat": .number(now), "exp": .number(now + week)]) == nil)
    }

    @Test("a token whose nbf is beyond the leeway in the future is rejected")
    func notYetValid() throws {
        #expect(try rejection(changing: ["nbf": .number(fixture.now.timeIntervalSince1970 + 31)]) == .notYetValid)
    }

    @Test("a wrong, missing or non-string aud is rejected")
    func wrongAudience() throws {
        #expect(try rejection(changing: ["aud": .string("anon")]) == .wrongAudience)
        #expect(try rejection(changing: ["aud": nil]) == .wrongAudience)
        #expect(try rejection(changing: ["aud": .array([.string("anon"), .string("service")])]) == .wrongAudience)
        #expect(try rejection(changing: ["aud": .array([.string("authenticated"), .number(1)])]) == .wrongAudience)
    }

    @Test("a role other than authenticated is rejected", arguments: ["anon", "service_role", "Authenticated"])
    func wrongRole(role: String) throws {
        #expect(try rejection(changing: ["role": .string(role)]) == .wrongRole)
    }

    @Test("a missing role is rejected")
    func missingRole() throws {
        #expect(try rejection(changing: ["role": nil]) == .wrongRole)
    }

    @Test("a sub that is not a UUID is rejected", arguments: ["user-1", "", "6F9619FF8B86D011B42D00C04FC964FF"])
    func badSubject(subject: String) throws {
        #expect(try rejection(changing: ["sub": .string(subject)]) == .badSubject)
    }

    @Test("a missing or numeric sub is rejected")
    func missingSubject() throws {
        #expect(try rejection(changing: ["sub": nil]) == .badSubject)
        #expect(try rejection(changing: ["sub": .number(42)]) == .badSubject)
    }

    @Test("an anonymous user's token is rejected")
    func anonymous() throws {
        #expect(try rejection(changing: ["is_anonymous": .bool(true)]) == .anonymous)
        #expect(try rejection(changing: ["is_anonymous": .string("true")]) == .malformed)
    }

    @Test("a wrong or missing iss is rejected when an issuer is configured")
    func wrongIssuer() throws {
        let verifier = fixture.verifier(issuer: "https://project.supabase.co/auth/v1")
        let other = try fixture.es256(fixture.claims(["iss": .string("https://project.supabase.co/auth/v1/")]))
        #expect(fixture.rejection(of: other, by: verifier) == .wrongIssuer)
        let missing = try fixture.es256(fixture.claims(["iss": nil]))
        #expect(fixture.rejection(of: missing, by: verifier) == .wrongIssuer)
    }
}

@Suite("caregiver token verifier: hostile encodings")
struct CaregiverTokenEncodingTests {
    let fixture: TokenFixture

    init() throws {
        fixture = try TokenFixture()
    }

    @Test("duplicate claim names are rejected even when correctly signed")
    func duplicateClaims() throws {
        let header = #"{"alg":"HS256","typ":"JWT"}"#
        var payload = try TokenFixture.text(.object(fixture.claims(["sub": nil])))
        payload.removeLast()
        payload += #","sub":"\#(fixture.userID.uuidString)","sub":"\#(UUID().uuidString)"}"#
        let token = try fixture.handBuilt(header: header, payload: payload, using: .hmac(secret: fixture.secret))
        #expect(fixture.rejection(of: token) == .duplicateMember)
    }

    @Test("duplicate header names are rejected even when correctly signed")
    func duplicateHeader() throws {
        let payload = try TokenFixture.text(.object(fixture.claims()))
        let token = try fixture.handBuilt(
            header: #"{"alg":"HS256","alg":"HS256"}"#, payload: payload, using: .hmac(secret: fixture.secret))
        #expect(fixture.rejection(of: token) == .duplicateMember)
    }

    @Test("the hand-built token path itself produces accepted tokens")
    func handBuiltControl() throws {
        let payload = try TokenFixture.text(.object(fixture.claims()))
        let token = try fixture.handBuilt(
            header: #"{"alg":"HS256"}"#, payload: payload, using: .hmac(secret: fixture.secret))
        #expect(fixture.rejection(of: token) == nil)
    }

    @Test("100 KB of dots is rejected by length before anything else")
    func hundredKilobytesOfDots() {
        #expect(fixture.rejection(of: String(repeating: ".", count: 100_000)) == .tooLong)
    }

    @Test("a token one byte over 8 KiB is rejected")
    func oneByteTooLong() throws {
        let token = try fixture.hs256()
        let padded =
            token + String(repeating: "A", count: CaregiverTokenVerifier.maximumTokenLength + 1 - token.utf8.count)
        #expect(fixture.rejection(of: padded) == .tooLong)
    }

    @Test("characters outside the base64url alphabet are rejected", arguments: ["+", "/", "=", " ", "é", "\n"])
    func badAlphabet(character: String) throws {
        let token = try fixture.hs256()
        let parts = TokenFixture.segments(token)
        #expect(
            fixture.rejection(of: TokenFixture.replacing(segment: 2, of: token, with: parts[2] + character))
                == .badAlphabet)
        #expect(
            fixture.rejection(of: TokenFixture.replacing(segment: 1, of: token, with: character + parts[1]))
                == .badAlphabet)
    }

    @Test("a token with four segments is rejected")
    func fourSegments() throws {
        #expect(fixture.rejection(of: try fixture.hs256() + ".e30") == .malformed)
    }

    @Test("a token with fewer than three segments is rejected")
    func twoSegments() throws {
        let parts = TokenFixture.segments(try fixture.hs256())
        #expect(fixture.rejection(of: parts[0] + "." + parts[1]) == .malformed)
    }

    @Test("an empty signature segment is rejected")
    func emptySignature() throws {
        #expect(
            fixture.rejection(of: TokenFixture.replacing(segment: 2, of: try fixture.hs256(), with: "")) == .malformed)
    }

    @Test("a signature segment with non-zero trailing bits is rejected as a second spelling")
    func nonCanonicalSignature() throws {
        let token = try fixture.hs256()
        var signature = Array(TokenFixture.segments(token)[2].utf8)
        // 32 bytes → 43 characters: the last carries 4 data bits and 2 unused bits, which must be zero.
        let values = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        let last = try #require(values.firstIndex(of: signature[signature.count - 1]))
        signature[signature.count - 1] = values[last | 1]
        let respelled = String(decoding: signature, as: UTF8.self)
        #expect(fixture.rejection(of: TokenFixture.replacing(segment: 2, of: token, with: respelled)) == .badEncoding)
    }

    @Test("a header that is not a JSON object is rejected")
    func headerNotAnObject() throws {
        let token = try fixture.hs256()
        #expect(
            fixture.rejection(
                of: TokenFixture.replacing(segment: 0, of: token, with: TokenFixture.encodedJSON(#"["HS256"]"#)))
                == .malformed)
        #expect(
            fixture.rejection(
                of: TokenFixture.replacing(segment: 0, of: token, with: TokenFixture.encodedJSON(#"{"alg":1}"#)))
                == .malformed)
    }

    @Test("a rejection's description never contains the token")
    func descriptionOmitsToken() throws {
        let token = try fixture.hs256(fixture.claims(["role": .string("anon")]))
        do {
            _ = try fixture.verifier().verify(token, now: fixture.now)
            Issue.record("expected a rejection")
        } catch {
            #expect(error.reason == .wrongRole)
            for part in TokenFixture.segments(token) { #expect(!"\(error)".contains(part)) }
        }
    }
}

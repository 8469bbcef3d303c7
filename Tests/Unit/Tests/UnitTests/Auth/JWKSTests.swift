@testable import Codecs
@testable import OpenSSLCrypto
@testable import JOSE
import Foundation
import Testing

@testable import CaregiverPush
import TestFixtures

@Suite("JWKS parsing")
struct JWKSTests {
    private func keySet(_ keys: [JSONValue]) throws -> String {
        try TokenFixture.text(.object(["keys": .array(keys)]))
    }

    private func jwk(_ key: PrivateKey, kid: String, changes: [String: JSONValue?] = [:]) throws -> JSONValue {
        guard case .object(var members) = try key.jwk(kid: kid) else { return .null }
        for (name, value) in changes { members[name] = value }
        return .object(members)
    }

    @Test("thumbprints are RFC 7638's: its own example, and a P-256 key against an independent canonical form")
    func thumbprints() throws {
        // RFC 7638, section 3.1.
        let example: JSONValue = .object([
            "kty": .string("RSA"), "kid": .string("2011-04-29"), "alg": .string("RS256"), "e": .string("AQAB"),
            "n": .string(
                "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
            ),
        ])
        let rsa = try JWKS(json: keySet([example]))
        #expect(rsa.key(id: "2011-04-29")?.thumbprint == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs")
        // Members that are not required (kid, alg, use) change nothing; the required ones in any order.
        let ec = try jwk(PrivateKey.generateP256(), kid: "e")
        let crv = try #require(ec["crv"]?.stringValue)
        let x = try #require(ec["x"]?.stringValue)
        let y = try #require(ec["y"]?.stringValue)
        let canonical = #"{"crv":"\#(crv)","kty":"EC","x":"\#(x)","y":"\#(y)"}"#
        let expected = Base64URL.encode(SHA256.hash(Array(canonical.utf8)))
        #expect(try JWKS(json: keySet([ec])).key(id: "e")?.thumbprint == expected)
        let renamed = try jwk(PrivateKey.generateP256(), kid: "other")
        #expect(try JWKS(json: keySet([renamed])).key(id: "other")?.thumbprint != expected)
    }

    @Test("a pinned set keeps only the keys whose thumbprints it names, whatever their kid")
    func pinning() throws {
        let first = try jwk(PrivateKey.generateP256(), kid: "a")
        let second = try jwk(PrivateKey.generateP256(), kid: "b")
        let jwks = try JWKS(json: keySet([first, second]))
        let pin = try #require(jwks.key(id: "a")?.thumbprint)
        let (kept, left) = jwks.keeping(thumbprints: [pin])
        #expect(kept.keyIDs == ["a"] && left == ["b"])
        // The same key material under the kid of the pinned key does not pass: a kid is the publisher's to choose.
        guard case .object(var impostor) = second else { return }
        impostor["kid"] = .string("a")
        #expect(try JWKS(json: keySet([.object(impostor)])).keeping(thumbprints: [pin]).keys.isEmpty)
    }

    @Test("RSA and P-256 keys are accepted with the algorithm of their type")
    func acceptsSupportedKeys() throws {
        let rsa = try jwk(PrivateKey.generateRSA(), kid: "r", changes: ["alg": nil, "use": nil])
        let ec = try jwk(PrivateKey.generateP256(), kid: "e")
        let jwks = try JWKS(json: keySet([rsa, ec]))
        #expect(jwks.keyIDs == ["e", "r"])
        #expect(jwks.key(id: "r")?.algorithm == .rs256)
        #expect(jwks.key(id: "e")?.algorithm == .es256)
        #expect(jwks.key(id: "x") == nil)
    }

    @Test(
        "a key whose alg disagrees with its type is skipped, and the other keys stay",
        arguments: ["ES256", "PS256", "HS256", "EdDSA", "none"])
    func algorithmDisagreement(alg: String) throws {
        let rsa = try jwk(PrivateKey.generateRSA(), kid: "r", changes: ["alg": .string(alg)])
        let ec = try jwk(PrivateKey.generateP256(), kid: "e")
        let jwks = try JWKS(json: keySet([rsa, ec]))
        #expect(jwks.keyIDs == ["e"])
        #expect(jwks.skippedKeys == [.init(index: 0, id: "r", reason: .algorithmMismatch)])
    }

    @Test("an EC key marked RS256 and an Ed25519 key marked ES256 are skipped")
    func mislabelledKeys() throws {
        let ec = try jwk(PrivateKey.generateP256(), kid: "e", changes: ["alg": .string("RS256")])
        let ed = try jwk(PrivateKey.generateEd25519(), kid: "d", changes: ["alg": .string("ES256")])
        let jwks = try JWKS(json: keySet([ec, ed]))
        #expect(jwks.isEmpty)
        #expect(jwks.skippedKeys.map(\.reason) == [.algorithmMismatch, .algorithmMismatch])
    }

    @Test("an Ed25519 key (OKP) is accepted for EdDSA, with or without alg")
    func ed25519() throws {
        let key = try PrivateKey.generateEd25519()
        let published = try key.jwk(kid: "d")
        #expect(published["kty"] == .string("OKP") && published["crv"] == .string("Ed25519"))
        #expect(published["alg"] == .string("EdDSA") && published["d"] == nil)
        let jwks = try JWKS(json: keySet([published, try jwk(key, kid: "d2", changes: ["alg": nil])]))
        #expect(jwks.keyIDs == ["d", "d2"])
        #expect(jwks.key(id: "d")?.algorithm == .edDSA)
        #expect(jwks.skippedKeys.isEmpty)
    }

    @Test("oct keys, other curves and encryption keys are skipped with their reason, not fatal")
    func skipsUnusableKeys() throws {
        let oct: JSONValue = .object(["kty": .string("oct"), "kid": .string("o"), "k": .string("c2VjcmV0")])
        let p384: JSONValue = .object([
            "kty": .string("EC"), "crv": .string("P-384"), "kid": .string("p"), "x": .string("AA"), "y": .string("AA"),
        ])
        let encryption = try jwk(PrivateKey.generateP256(), kid: "enc", changes: ["use": .string("enc"), "alg": nil])
        let ec = try jwk(PrivateKey.generateP256(), kid: "e")
        let jwks = try JWKS(json: keySet([oct, p384, encryption, ec, .number(1)]))
        #expect(jwks.keyIDs == ["e"])
        #expect(
            jwks.skippedKeys == [
                .init(index: 0, id: "o", reason: .unsupportedKey), .init(index: 1, id: "p", reason: .unsupportedKey),
                .init(index: 2, id: "enc", reason: .notForSigning), .init(index: 4, id: nil, reason: .malformedKey),
            ])
    }

    @Test("a duplicated kid is skipped in every copy: which key signed cannot be known")
    func duplicateKeyID() throws {
        let first = try jwk(PrivateKey.generateP256(), kid: "same")
        let second = try jwk(PrivateKey.generateRSA(), kid: "same")
        let other = try jwk(PrivateKey.generateP256(), kid: "other")
        let jwks = try JWKS(json: keySet([first, other, second]))
        #expect(jwks.keyIDs == ["other"])
        #expect(
            jwks.skippedKeys == [
                .init(index: 0, id: "same", reason: .duplicateKeyID),
                .init(index: 2, id: "same", reason: .duplicateKeyID),
            ])
    }

    @Test("a supported key without a kid is skipped")
    func missingKeyID() throws {
        let ec = try jwk(PrivateKey.generateP256(), kid: "e", changes: ["kid": nil])
        let jwks = try JWKS(json: keySet([ec]))
        #expect(jwks.isEmpty && jwks.skippedKeys == [.init(index: 0, id: nil, reason: .missingKeyID)])
    }

    @Test("a key whose point is not on the curve, or an RSA key under 2048 bits, is skipped")
    func invalidKeys() throws {
        let ec = try jwk(
            PrivateKey.generateP256(), kid: "e",
            changes: ["x": .string(Base64URL.encode([UInt8](repeating: 1, count: 32)))])
        let keys = try TokenFixture.unusableKeys()
        let jwks = try JWKS(json: keySet([ec, keys[0]]))
        #expect(jwks.isEmpty)
        #expect(
            jwks.skippedKeys == [
                .init(index: 0, id: "e", reason: .invalidKey), .init(index: 1, id: "rsa-1024", reason: .weakKey),
            ])
    }

    @Test(
        "malformed documents are errors",
        arguments: [
            #"{"keys":{}}"#, #"{"key":[]}"#, #"[]"#, #"{"keys":[],"keys":[]}"#, "not json",
        ])
    func malformed(json: String) {
        #expect(throws: JWKSError.self) { try JWKS(json: json) }
    }

    @Test("an empty key set parses and is empty")
    func emptySet() throws {
        #expect(try JWKS(json: #"{"keys":[]}"#).isEmpty)
    }

    @Test("a JWKS error's description names the rule, not the document")
    func errorDescription() {
        #expect("\(JWKSError(.notAKeySet))" == "JWKS rejected: notAKeySet")
    }
}

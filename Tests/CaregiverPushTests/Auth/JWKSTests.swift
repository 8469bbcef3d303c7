import Foundation
import Testing

@testable import CaregiverPush

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
        "a key whose alg disagrees with its type makes the set an error",
        arguments: ["ES256", "PS256", "HS256", "none"])
    func algorithmDisagreement(alg: String) throws {
        let rsa = try jwk(PrivateKey.generateRSA(), kid: "r", changes: ["alg": .string(alg)])
        #expect(throws: JWKSError(.algorithmMismatch, keyIndex: 0)) { try JWKS(json: keySet([rsa])) }
    }

    @Test("an EC key marked RS256 makes the set an error")
    func ecMarkedRS256() throws {
        let ec = try jwk(PrivateKey.generateP256(), kid: "e", changes: ["alg": .string("RS256")])
        #expect(throws: JWKSError(.algorithmMismatch, keyIndex: 0)) { try JWKS(json: keySet([ec])) }
    }

    @Test("oct keys, other curves and encryption keys are skipped, not fatal")
    func skipsUnusableKeys() throws {
        let oct: JSONValue = .object(["kty": .string("oct"), "kid": .string("o"), "k": .string("c2VjcmV0")])
        let p384: JSONValue = .object([
            "kty": .string("EC"), "crv": .string("P-384"), "kid": .string("p"), "x": .string("AA"), "y": .string("AA"),
        ])
        let encryption = try jwk(PrivateKey.generateP256(), kid: "enc", changes: ["use": .string("enc"), "alg": nil])
        let ec = try jwk(PrivateKey.generateP256(), kid: "e")
        let jwks = try JWKS(json: keySet([oct, p384, encryption, ec]))
        #expect(jwks.keyIDs == ["e"])
    }

    @Test("duplicate kids are an error")
    func duplicateKeyID() throws {
        let first = try jwk(PrivateKey.generateP256(), kid: "same")
        let second = try jwk(PrivateKey.generateRSA(), kid: "same")
        #expect(throws: JWKSError(.duplicateKeyID, keyIndex: 1)) { try JWKS(json: keySet([first, second])) }
    }

    @Test("a supported key without a kid is an error")
    func missingKeyID() throws {
        let ec = try jwk(PrivateKey.generateP256(), kid: "e", changes: ["kid": nil])
        #expect(throws: JWKSError(.missingKeyID, keyIndex: 0)) { try JWKS(json: keySet([ec])) }
    }

    @Test("a key whose point is not on the curve is an error")
    func invalidPoint() throws {
        let ec = try jwk(
            PrivateKey.generateP256(), kid: "e",
            changes: ["x": .string(Base64URL.encode([UInt8](repeating: 1, count: 32)))])
        #expect(throws: JWKSError(.invalidKey, keyIndex: 0)) { try JWKS(json: keySet([ec])) }
    }

    @Test(
        "malformed documents are errors",
        arguments: [
            #"{"keys":{}}"#, #"{"key":[]}"#, #"[]"#, #"{"keys":[1]}"#, #"{"keys":[],"keys":[]}"#, "not json",
        ])
    func malformed(json: String) {
        #expect(throws: JWKSError.self) { try JWKS(json: json) }
    }

    @Test("an empty key set parses and is empty")
    func emptySet() throws {
        #expect(try JWKS(json: #"{"keys":[]}"#).isEmpty)
    }

    @Test("a JWKS error's description names the rule and position, not key material")
    func errorDescription() {
        #expect("\(JWKSError(.duplicateKeyID, keyIndex: 2))" == "JWKS rejected: duplicateKeyID at keys[2]")
    }
}

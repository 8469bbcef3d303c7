@testable import Codecs
@testable import OpenSSLCrypto
@testable import JOSE
@testable import FunctionRuntime
import Foundation
import Testing

@testable import CaregiverPush
import TestFixtures

/// Writes the fuzz seed corpus and the fuzz key set. Opt-in, since it rewrites committed files:
///
///     FUZZ_MINT_SEEDS=1 swift test --filter FuzzSeeds
///
/// Each run generates a new RSA and P-256 key and forgets the private halves at the end: only the public key set
/// (`Tests/Fuzz/Keys/jwks.json`) and the tokens signed with it are kept, so no private key is committed and all
/// signed seeds are replaced together. Seeds are small and readable: the fixture events with their placeholders
/// filled in, caregiver tokens that pass and that each break one rule, and one body per endpoint.
@Suite("fuzz seeds")
struct FuzzSeeds {
    static let rsaKeyID = "fuzz-rsa-1"
    static let ecKeyID = "fuzz-ec-1"
    static let medicationID = "7d1e0000-0000-4000-8000-000000000003"
    static let idempotencyKey = "5f0e7b0c-3c57-4e1a-9d0b-1b2c3d4e5f60"
    static let patientToken = PatientSessionToken.prefix + Base64URL.encode([UInt8](repeating: 0x5A, count: 32))

    @Test(
        "mint the seed corpus and key set",
        .enabled(if: ProcessInfo.processInfo.environment["FUZZ_MINT_SEEDS"] == "1"))
    func mint() throws {
        let rsaKey = try PrivateKey.generateRSA()
        let ecKey = try PrivateKey.generateP256()
        let jwks = JSONValue.object([
            "keys": .array([try rsaKey.jwk(kid: Self.rsaKeyID), try ecKey.jwk(kid: Self.ecKeyID)])
        ])
        try write(Data((Self.json(jwks, pretty: true) + "\n").utf8), to: FuzzInputs.jwksFile)
        let tokens = try Self.tokens(rsaKey: rsaKey, ecKey: ecKey)
        for (name, token) in tokens {
            try write(Data(token.utf8), to: FuzzInputs.corpus("token-verifier").appendingPathComponent(name))
        }
        let caregiverToken = try #require(tokens["valid-hs256.jwt"])
        for (name, event) in try Self.fixtureEvents(caregiverToken: caregiverToken) {
            try write(event, to: FuzzInputs.corpus("envelope").appendingPathComponent(name))
        }
        for (name, input) in Self.validatorInputs() {
            try write(Data(input), to: FuzzInputs.corpus("validators").appendingPathComponent(name))
        }
    }

    private func write(_ data: Data, to file: URL) throws {
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: file)
    }

    /// Claims valid at ``FuzzFixture/now`` for the fixed issuer; `changes` overrides or (with `nil`) removes.
    static func claims(_ changes: [String: JSONValue?] = [:]) -> [String: JSONValue] {
        let now = FuzzFixture.now.timeIntervalSince1970
        var claims: [String: JSONValue] = [
            "sub": .string(FuzzFixture.caregiverID.uuidString.lowercased()), "aud": .string("authenticated"),
            "role": .string("authenticated"), "exp": .number(now + 3600), "iat": .number(now - 60),
            "iss": .string(FuzzFixture.issuer), "is_anonymous": .bool(false),
        ]
        for (name, value) in changes { claims[name] = value }
        return claims
    }

    /// Tokens named `valid-…` (each must verify) and `rejected-…` (each breaks one rule).
    static func tokens(rsaKey: PrivateKey, ecKey: PrivateKey) throws -> [String: String] {
        let secret = JWTSigningKey.hmac(secret: Array(FuzzFixture.hs256Secret.utf8))
        let rsa = JWTSigningKey.rsa(rsaKey, kid: rsaKeyID)
        let now = FuzzFixture.now.timeIntervalSince1970
        let valid = try JWTSigner.sign(claims: claims(), using: secret)
        let validParts = valid.split(separator: ".").map(String.init)
        let otherPayload = Base64URL.encode(Array(json(.object(claims(["sub": .string(UUID().uuidString)]))).utf8))
        return [
            "valid-hs256.jwt": valid,
            "valid-hs256-own-kid.jwt": try JWTSigner.sign(
                header: ["kid": .string("legacy")], claims: claims(), using: secret),
            "valid-rs256.jwt": try JWTSigner.sign(claims: claims(), using: rsa),
            "valid-es256.jwt": try JWTSigner.sign(claims: claims(), using: .ec(ecKey, kid: ecKeyID)),
            "valid-aud-array-nbf.jwt": try JWTSigner.sign(
                claims: claims(["aud": .array([.string("other"), .string("authenticated")]), "nbf": .number(now - 10)]),
                using: secret),
            "rejected-expired.jwt": try JWTSigner.sign(claims: claims(["exp": .number(now - 60)]), using: secret),
            "rejected-not-yet-valid.jwt": try JWTSigner.sign(
                claims: claims(["nbf": .number(now + 600)]), using: secret),
            "rejected-wrong-issuer.jwt": try JWTSigner.sign(
                claims: claims(["iss": .string("https://x")]), using: secret),
            "rejected-anonymous.jwt": try JWTSigner.sign(claims: claims(["is_anonymous": .bool(true)]), using: secret),
            "rejected-bad-sub.jwt": try JWTSigner.sign(claims: claims(["sub": .string("not-a-uuid")]), using: secret),
            "rejected-unknown-kid.jwt": try JWTSigner.sign(claims: claims(), using: .rsa(rsaKey, kid: "unknown")),
            "rejected-tampered-payload.jwt": [validParts[0], otherPayload, validParts[2]].joined(separator: "."),
            "rejected-alg-none.jwt": [
                Base64URL.encode(Array(#"{"alg":"none","typ":"JWT"}"#.utf8)), validParts[1], "AA",
            ]
            .joined(separator: "."),
            "rejected-crit.jwt": try JWTSigner.sign(
                header: ["crit": .array([.string("exp")])], claims: claims(), using: secret),
            "rejected-alg-mismatch.jwt": try JWTSigner.sign(
                headerJSON: Array(#"{"alg":"HS256","kid":"\#(rsaKeyID)"}"#.utf8),
                payloadJSON: Array(json(.object(claims())).utf8), using: secret),
            "rejected-duplicate-claim.jwt": try JWTSigner.sign(
                headerJSON: Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8),
                payloadJSON: Array(
                    #"{"aud":"authenticated","exp":\#(Int(now) + 3600),"iss":"\#(FuzzFixture.issuer)","role":"authenticated","#
                        .utf8)
                    + Array(
                        #""sub":"\#(FuzzFixture.caregiverID.uuidString.lowercased())","sub":"\#(UUID().uuidString)"}"#
                            .utf8),
                using: secret),
        ]
    }

    /// `Tests/Fixtures/<function>/<name>.json` as `<function>-<name>.json`, placeholders filled in (also inside a
    /// base64 body), with a caregiver token valid at ``FuzzFixture/now``.
    static func fixtureEvents(caregiverToken: String) throws -> [String: Data] {
        let values = [
            "CAREGIVER_TOKEN": caregiverToken, "PATIENT_TOKEN": patientToken, "DEVICE_TOKEN": "fuzz-device:token_1",
            "INSTALLATION_ID": "install-1", "PATIENT_ID": FuzzFixture.patientID.uuidString.lowercased(),
            "MEDICATION_ID": medicationID, "SCHEDULED_AT": "2025-06-15T08:00:00+09:00",
            "TAKEN_AT": "2025-06-15T08:05:00+09:00", "DATE": "2025-06-15", "SLOT": "morning",
            "IDEMPOTENCY_KEY": idempotencyKey,
        ]
        func fill(_ text: String) -> String {
            values.reduce(text) { $0.replacingOccurrences(of: "${\($1.key)}", with: $1.value) }
        }
        let fixtures = FuzzInputs.root.deletingLastPathComponent().appendingPathComponent("Fixtures")
        var events: [String: Data] = [:]
        for function in FuzzInputs.files(in: fixtures) {
            for file in FuzzInputs.files(in: function) where file.pathExtension == "json" {
                let text = fill(try String(contentsOf: file, encoding: .utf8))
                var bytes = Data(text.utf8)
                // A base64 body hides its placeholders: decode, fill, re-encode (the fixture's other bytes are kept
                // as they are everywhere else, unknown members included).
                var event = try JSONDecoder().decode(APIGatewayV2Request.self, from: bytes)
                if event.isBase64Encoded == true, let body = event.body, let decoded = Base64.decode(body) {
                    event.body = Base64.encode(Array(fill(String(decoding: decoded, as: UTF8.self)).utf8))
                    bytes = try encoder(pretty: true).encode(event)
                }
                #expect(!String(decoding: bytes, as: UTF8.self).contains("${"), "\(file.path): unfilled placeholder")
                events["\(function.lastPathComponent)-\(file.lastPathComponent)"] = bytes
            }
        }
        return events
    }

    /// One selector byte (see `ValidatorCheck`) then a body: valid bodies of each endpoint, and a few near misses.
    static func validatorInputs() -> [String: [UInt8]] {
        let patient = FuzzFixture.patientID.uuidString.lowercased()
        let bodies: [(String, UInt8, String)] = [
            (
                "push-register", 0x00,
                #"{"token":"fuzz-device:token_1","platform":"ios","environment":"DEV","installationId":"install-1"}"#
            ),
            ("push-register-invalid", 0x00, #"{"token":"bad token","platform":"android","environment":"dev"}"#),
            ("push-unregister", 0x01, #"{"token":"fuzz-device:token_1"}"#),
            (
                "dose-record-caregiver", 0x02,
                #"{"patientId":"\#(patient)","medicationId":"\#(medicationID)","scheduledAt":"2025-06-15T08:00:00+09:00","takenAt":"2025-06-15T08:05:00.5Z"}"#
            ),
            (
                "dose-record-patient", 0x0A,
                #"{"medicationId":"\#(medicationID)","scheduledAt":"2025-06-15T08:00:00+09:00"}"#
            ),
            ("slot-bulk-record-caregiver", 0x03, #"{"patientId":"\#(patient)","date":"2025-06-15","slot":"morning"}"#),
            (
                "slot-bulk-record-patient", 0x0B,
                #"{"date":"2025-06-16","slot":"bedtime","takenAt":"2025-06-16T00:01:00+09:00"}"#
            ),
            (
                "prn-record-caregiver-key", 0x14,
                #"{"patientId":"\#(patient)","medicationId":"\#(medicationID)","quantity":2}"#
            ),
            ("prn-record-patient-bad-key", 0x2C, #"{"medicationId":"\#(medicationID)","quantity":1e1,"takenAt":null}"#),
            ("duplicate-member", 0x01, #"{"token":"a","token":"b"}"#),
            (
                "escapes", 0x00,
                #"{"token":"\u0041\ud83d\ude00","platform":"\u0069os","environment":"PROD","x":[1,-0.5e-3,true,null,{}]}"#
            ),
        ]
        return Dictionary(uniqueKeysWithValues: bodies.map { ("\($0.0).bin", [$0.1] + Array($0.2.utf8)) })
    }

    static func encoder(pretty: Bool) -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes] : [.sortedKeys]
        return encoder
    }

    static func json(_ value: JSONValue, pretty: Bool = false) -> String {
        String(decoding: (try? encoder(pretty: pretty).encode(value)) ?? Data(), as: UTF8.self)
    }
}

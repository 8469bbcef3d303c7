import CaregiverPush
import Foundation
import JOSE
import OpenSSLCrypto
import Testing
import TestFixtures
import TestSupport

/// The caregiver keys a configuration names (secret, JWKS inline or @file, issuer), through push-register
/// in-process against the test database.
@Suite("caregiver keys from the configuration")
struct CaregiverKeysTests {
    let body = json(["token": .string("t"), "platform": .string("ios"), "environment": .string("DEV")])

    @Test("a secret under 32 characters is refused: 500, and the log names SUPABASE_JWT_SECRET")
    func shortSecret() throws {
        let result = invoke(
            PushRegister(), event: makeEvent(bearer: try caregiverToken(UUID(), secret: "short"), body: body),
            environment: testEnvironment(["SUPABASE_JWT_SECRET": "short"]))
        #expect(result.status == 500)
        #expect(result.log.contains("\"config.variable\":\"SUPABASE_JWT_SECRET\""))
    }

    @Test("ES256 and RS256 caregiver tokens verify against SUPABASE_JWKS, inline or @file")
    func jwksTokens() throws {
        let ecKey = try PrivateKey.generateP256()
        let rsaKey = try PrivateKey.generateRSA()
        let jwks = json(["keys": .array([try ecKey.jwk(kid: "ec-1"), try rsaKey.jwk(kid: "rsa-1")])])
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID().uuidString).json")
        try jwks.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        for source in [jwks, "@" + file.path] {
            let environment = testEnvironment(["SUPABASE_JWT_SECRET": nil, "SUPABASE_JWKS": source])
            for key in [JWTSigningKey.ec(ecKey, kid: "ec-1"), .rsa(rsaKey, kid: "rsa-1")] {
                let caregiver = UUID()
                let deviceToken = makeDeviceToken()
                let now = Date().timeIntervalSince1970.rounded(.down)
                let token = try JWTSigner.sign(
                    claims: [
                        "sub": .string(caregiver.uuidString.lowercased()), "aud": .string("authenticated"),
                        "role": .string("authenticated"), "exp": .number(now + 600),
                    ],
                    using: key)
                let request = json([
                    "token": .string(deviceToken), "platform": .string("ios"), "environment": .string("DEV"),
                ])
                let result = invoke(
                    PushRegister(), event: makeEvent(bearer: token, body: request), environment: environment)
                #expect(result.status == 200)
                #expect(try TestDatabase.with { try Seed.devices($0, token: deviceToken) }.first?.ownerID == caregiver)
            }
            // With only a JWKS configured, an HS256 token has no key to be checked against.
            let hs256 = invoke(
                PushRegister(), event: makeEvent(bearer: try caregiverToken(UUID()), body: body),
                environment: environment)
            #expect(hs256.status == 401)
        }
    }

    @Test("a SUPABASE_JWKS that is no key set is logged; HS256 tokens still verify; alone it is a 500 naming it")
    func invalidJWKS() throws {
        let beside = invoke(
            PushRegister(), event: makeEvent(bearer: try caregiverToken(UUID()), body: body),
            environment: testEnvironment(["SUPABASE_JWKS": "{\"keys\": 5}"]))
        #expect(beside.status == 200)
        #expect(beside.log.contains("\"config.variable\":\"SUPABASE_JWKS\""))
        let alone = invoke(
            PushRegister(), event: makeEvent(bearer: try caregiverToken(UUID()), body: body),
            environment: testEnvironment(["SUPABASE_JWKS": "{\"keys\": 5}", "SUPABASE_JWT_SECRET": nil]))
        #expect(alone.status == 500)
        #expect(alone.log.contains("\"config.variable\":\"SUPABASE_JWKS\""))
    }

    @Test("SUPABASE_JWT_ISSUER unset: PROD refuses to verify (500, named), DEV accepts and says so in its log")
    func issuerUnset() throws {
        let event = makeEvent(bearer: try caregiverToken(UUID()), body: body)
        let production = invoke(
            PushRegister(), event: event,
            environment: testEnvironment(["PUSH_ENVIRONMENT": "PROD", "SUPABASE_JWT_ISSUER": nil]))
        #expect(production.status == 500)
        #expect(production.log.contains("\"config.variable\":\"SUPABASE_JWT_ISSUER\""))
        let development = invoke(
            PushRegister(), event: event,
            environment: testEnvironment(["PUSH_ENVIRONMENT": "DEV", "SUPABASE_JWT_ISSUER": nil]))
        #expect(development.status == 200)
        #expect(development.log.contains("SUPABASE_JWT_ISSUER is not set: tokens of any issuer are accepted"))
    }

    @Test("SUPABASE_JWT_ISSUER, when set, must equal the token's iss")
    func issuer() throws {
        let environment = testEnvironment(["SUPABASE_JWT_ISSUER": "https://project.supabase.co/auth/v1"])
        let result = invoke(
            PushRegister(), event: makeEvent(bearer: try caregiverToken(UUID()), body: body), environment: environment)
        #expect(result.status == 401)
        #expect(result.log.contains("\"auth.reason\":\"wrongIssuer\""))
    }
}

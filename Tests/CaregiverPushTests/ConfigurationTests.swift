import OpenSSLCrypto
import JOSE
import CaregiverPush
import Foundation
import Testing

@Suite("configuration and caregiver keys")
struct ConfigurationTests {
    let body = json(["token": .string("t"), "platform": .string("ios"), "environment": .string("DEV")])

    @Test("defaults: audience authenticated, FCM base URL, a 10 s push deadline")
    func defaults() {
        let configuration = Configuration(environment: ["DATABASE_URL": "x"])
        #expect(configuration.jwtAudience == "authenticated")
        #expect(configuration.fcmAPIBaseURL == "https://fcm.googleapis.com")
        #expect(configuration.pushSendDeadlineMilliseconds == 10_000)
        #expect(configuration.pushEnvironment == nil)
        #expect(configuration.pushMaxDevicesPerCaregiver == 10)
        #expect(configuration.errors.isEmpty)
    }

    @Test("PUSH_MAX_DEVICES_PER_CAREGIVER is 1 to 100; anything else is an error naming it, and the default holds")
    func deviceCap() {
        #expect(Configuration(environment: ["PUSH_MAX_DEVICES_PER_CAREGIVER": "3"]).pushMaxDevicesPerCaregiver == 3)
        for bad in ["0", "101", "ten"] {
            let configuration = Configuration(environment: ["PUSH_MAX_DEVICES_PER_CAREGIVER": bad])
            #expect(configuration.pushMaxDevicesPerCaregiver == 10)
            #expect(configuration.errors.map(\.variable) == ["PUSH_MAX_DEVICES_PER_CAREGIVER"])
        }
    }

    @Test("malformed values are recorded against their variable, not crashed on")
    func malformedValues() {
        let configuration = Configuration(environment: [
            "PUSH_ENVIRONMENT": "STAGING", "PUSH_SEND_DEADLINE_MS": "soon", "SUPABASE_JWT_SECRET": "short",
            "SUPABASE_JWKS": "@/nonexistent/jwks.json",
        ])
        #expect(
            Set(configuration.errors.map(\.variable))
                == ["PUSH_ENVIRONMENT", "PUSH_SEND_DEADLINE_MS", "SUPABASE_JWT_SECRET", "SUPABASE_JWKS"])
        #expect(configuration.jwtSecret == nil)
        #expect(configuration.pushSendDeadlineMilliseconds == 10_000)
    }

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

    @Test(
        "SUPABASE_JWKS_URL must be https (http only on loopback); a bad one is an error naming it",
        arguments: [
            ("https://abcdefgh.supabase.co/auth/v1/.well-known/jwks.json", true),
            ("http://127.0.0.1:3000/auth/v1/.well-known/jwks.json", true),
            ("http://localhost/jwks.json", true), ("http://[::1]:8080/jwks.json", true),
            ("http://abcdefgh.supabase.co/auth/v1/.well-known/jwks.json", false),
            ("http://127.0.0.1.example.com/jwks.json", false), ("ftp://127.0.0.1/jwks.json", false),
            ("https://user:pass@example.com/jwks.json", false), ("not a url", false),
        ])
    func jwksURL(url: String, accepted: Bool) {
        let configuration = Configuration(environment: ["SUPABASE_JWKS_URL": url])
        #expect((configuration.jwksURL == url) == accepted)
        #expect(configuration.errors.contains { $0.variable == "SUPABASE_JWKS_URL" } == !accepted)
        #expect(!configuration.errors.contains { $0.description.contains(url) })
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

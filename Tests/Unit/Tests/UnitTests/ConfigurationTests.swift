import OpenSSLCrypto
import JOSE
import CaregiverPush
import Foundation
import Testing
import TestFixtures

@Suite("configuration")
struct ConfigurationTests {
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

    @Test(
        "DATABASE_LOCK_TIMEOUT_MS and DATABASE_STATEMENT_TIMEOUT_MS are 1 to 60000 ms; anything else is an error naming it and the range, and the default holds"
    )
    func transactionBounds() {
        let edges = Configuration(environment: [
            "DATABASE_LOCK_TIMEOUT_MS": "1", "DATABASE_STATEMENT_TIMEOUT_MS": "60000",
        ])
        #expect(edges.errors.isEmpty)
        #expect(edges.transactionSettings.lockTimeoutMilliseconds == 1)
        #expect(edges.transactionSettings.statementTimeoutMilliseconds == 60_000)
        for bad in ["0", "60001", "-1", "2s", "1e3"] {
            let configuration = Configuration(environment: ["DATABASE_STATEMENT_TIMEOUT_MS": bad])
            #expect(configuration.transactionSettings.statementTimeoutMilliseconds == 5000, "\(bad)")
            #expect(configuration.transactionSettings.lockTimeoutMilliseconds == 2000, "\(bad)")
            #expect(configuration.errors.map(\.variable) == ["DATABASE_STATEMENT_TIMEOUT_MS"], "\(bad)")
            #expect(configuration.errors.map(\.reason) == ["must be 1 to 60000 milliseconds"], "\(bad)")
        }
    }

    @Test(
        "DATABASE_PREPARED_STATEMENTS is on or off (default off), anything else an error naming it; the session's connections follow it"
    )
    func preparedStatements() throws {
        #expect(!Configuration(environment: [:]).preparesStatements)
        #expect(Configuration(environment: ["DATABASE_PREPARED_STATEMENTS": "on"]).preparesStatements)
        #expect(!Configuration(environment: ["DATABASE_PREPARED_STATEMENTS": "off"]).preparesStatements)
        for bad in ["ON", "true", "1", "yes"] {
            let configuration = Configuration(environment: ["DATABASE_PREPARED_STATEMENTS": bad])
            #expect(!configuration.preparesStatements, "\(bad)")
            #expect(configuration.errors.map(\.variable) == ["DATABASE_PREPARED_STATEMENTS"], "\(bad)")
            #expect(configuration.errors.map(\.reason) == ["must be on or off"], "\(bad)")
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

    @Test(
        "a JSON database secret's port must be exactly an integer from 1 to 65535: huge, fractional or out of range is an error naming the ARN variable",
        arguments: [
            ("9223372036854775808", false), ("1e300", false), ("5432.5", false), ("0", false), ("65536", false),
            ("-1", false), (#""5432x""#, false), ("5432", true), ("5432.0", true), (#""6543""#, true),
        ])
    func databaseSecretPort(port: String, accepted: Bool) {
        let secret = #"{"host":"db.example","port":\#(port),"username":"app","password":"pw-secret","dbname":"x"}"#
        let resolved = Configuration.resolvingSecrets(in: ["DATABASE_SECRET_ARN": "arn:db"]) { _ in .success(secret) }
        #expect((resolved.environment["DATABASE_URL"] != nil) == accepted, "\(port)")
        #expect(resolved.errors.map(\.variable) == (accepted ? [] : ["DATABASE_SECRET_ARN"]), "\(port)")
        if accepted {
            let expected = port.contains("6543") ? "6543" : "5432"
            #expect(resolved.environment["DATABASE_URL"] == "postgresql://app:pw-secret@db.example:\(expected)/x")
        }
    }
}

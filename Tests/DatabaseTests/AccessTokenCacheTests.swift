@testable import Codecs
@testable import Curl
@testable import CaregiverPush
import FCMEmulator
import Foundation
import Libpq
import OpenSSLCrypto
import Logging
import Testing
import TestFixtures
import TestSupport

/// The shared OAuth access token (docs/behaviour.md#access-token).
@Suite("FCM access token cache")
struct AccessTokenCacheTests {
    static func provider(_ fake: FCMFake) throws -> AccessTokenProvider {
        let configuration = fake.configuration()
        let account = try #require(try ServiceAccount.load(from: configuration))
        return try AccessTokenProvider(account: account)
    }

    @Test("a token with under five minutes left is replaced; one with more is reused from the database")
    func refreshMargin() throws {
        let fake = try FCMFake()
        let logger = Logger(label: "t")
        // Minted 56 minutes ago (Google's clock, the emulator's, is the real one: an assertion from the future would
        // be refused), so that "now" is when it has under five minutes left.
        let start = Date() - 3360
        try TestDatabase.with { connection in
            let first = try Self.provider(fake).accessToken(connection: connection, now: start, logger: logger)
            #expect(try fake.mints == 1)
            // Another process, 30 minutes on (the token lives an hour): reused from the database.
            #expect(
                try Self.provider(fake).accessToken(connection: connection, now: start + 1800, logger: logger) == first)
            #expect(try fake.mints == 1)
            // 56 minutes on: under five minutes left, replaced.
            let second = try Self.provider(fake).accessToken(connection: connection, now: start + 3360, logger: logger)
            #expect(second != first)
            #expect(try fake.mints == 2)
        }
    }

    @Test("a stored token whose expiry a writer of the table moved does not open: a new one is minted over it")
    func expiryIsSealed() throws {
        let fake = try FCMFake()
        let logger = Logger(label: "t")
        // Minted 58 minutes ago: under two minutes left now.
        let start = Date() - 3480
        try TestDatabase.with { connection in
            let first = try Self.provider(fake).accessToken(connection: connection, now: start, logger: logger)
            // Made to look a day younger, then asked for now, when the real token has under two minutes left.
            try connection.query(
                "UPDATE fcm_access_tokens SET expires_at = expires_at + interval '1 day' WHERE client_email = \(fake.clientEmail)"
            )
            let later = try Self.provider(fake).accessToken(connection: connection, now: start + 3480, logger: logger)
            #expect(later != first)
            #expect(try fake.mints == 2)
        }
    }

    @Test("the stored token is sealed: no clear text in the row; a row that does not open is minted over, not trusted")
    func sealedAtRest() throws {
        let fake = try FCMFake()
        let logger = Logger(label: "t")
        try TestDatabase.with { connection in
            let token = try Self.provider(fake).accessToken(connection: connection, logger: logger)
            let stored = try connection.query(
                "SELECT sealed_token FROM fcm_access_tokens WHERE client_email = \(fake.clientEmail)"
            )[0].decode(PostgresBytes.self, at: 0).bytes
            #expect(!stored.isEmpty && String(decoding: stored, as: UTF8.self).contains(token) == false)
            // A row sealed under another key (the service account's key was rotated), far from expiry, holding a
            // token someone else chose: never handed out; a new token is minted over it.
            let expiry = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 3000).rounded(.down))
            let planted = try AES256GCM.seal(
                Array("ya29.planted".utf8), key: try SecureRandom.bytes(32),
                associatedData: AccessTokenProvider.associatedData(fake.clientEmail, expiry))
            try connection.query(
                """
                UPDATE fcm_access_tokens SET sealed_token = \(PostgresBytes(planted)), expires_at = \(expiry)
                WHERE client_email = \(fake.clientEmail)
                """)
            let minted = try Self.provider(fake).accessToken(connection: connection, logger: logger)
            #expect(minted != "ya29.planted" && minted != token)
            #expect(try fake.mints == 2)
            // And what it stored opens again for the next process.
            #expect(try Self.provider(fake).accessToken(connection: connection, logger: logger) == minted)
            #expect(try fake.mints == 2)
        }
    }

    @Test("a warm process keeps the token in memory; a rejected token is never handed out again")
    func memoryCacheAndRejection() throws {
        let fake = try FCMFake()
        let logger = Logger(label: "t")
        try TestDatabase.with { connection in
            let provider = try Self.provider(fake)
            let first = try provider.accessToken(connection: connection, logger: logger)
            try connection.query("DELETE FROM fcm_access_tokens WHERE client_email = \(fake.clientEmail)")
            #expect(try provider.accessToken(connection: connection, logger: logger) == first)
            let replaced = try provider.accessToken(connection: connection, rejected: first, logger: logger)
            #expect(replaced != first)
            #expect(try fake.mints == 2)
        }
    }

    @Test("the token endpoint's refusal is an error carrying its OAuth code, not the assertion")
    func refusedAssertion() throws {
        let fake = try FCMFake()
        let other = try FCMFake()
        // A key the fake does not know: its signature cannot verify.
        var configuration = fake.configuration()
        let foreign = try #require(try ServiceAccount.load(from: other.configuration()))
        let pointed = ServiceAccountKeyFile.json(
            projectID: foreign.projectID, clientEmail: foreign.clientEmail, privateKeyID: foreign.privateKeyID,
            privateKeyPEM: foreign.privateKeyPEM, tokenURI: fake.baseURL + "/token")
        configuration.fcmServiceAccountBase64 = Data(pointed.utf8).base64EncodedString()
        let provider = try AccessTokenProvider(account: try #require(try ServiceAccount.load(from: configuration)))
        try TestDatabase.with { connection in
            #expect(throws: TokenExchangeError(status: 400, error: "invalid_grant")) {
                _ = try provider.accessToken(connection: connection, logger: Logger(label: "t"))
            }
        }
        #expect(try fake.mints == 0)
    }
}

/// The emulator's reading of FCM's rule that a message has exactly one target: `token`, or the `fid` newer SDKs send,
/// never both.
@Suite("FCM emulator targets")
struct FCMEmulatorTargetTests {
    @Test("a message with token or fid is delivered; one with both or neither is a 400")
    func exactlyOneTarget() throws {
        let fake = try FCMFake()
        let accessToken = try TestDatabase.with { connection in
            try AccessTokenCacheTests.provider(fake).accessToken(connection: connection, logger: Logger(label: "t"))
        }
        func send(_ message: [String: JSONValue]) -> Int? {
            let request = CurlRequest(
                method: "POST", url: fake.baseURL + "/v1/projects/demo-project/messages:send",
                headers: [("Authorization", "Bearer \(accessToken)"), ("Content-Type", "application/json")],
                body: Array(json(["message": .object(message)]).utf8))
            guard case .success(let response) = CurlClient.perform(request, timeoutMilliseconds: 5000) else {
                return nil
            }
            return response.status
        }
        let token = makeDeviceToken()
        #expect(send(["token": .string(token)]) == 200)
        #expect(send(["fid": .string("installation-\(UUID().uuidString)")]) == 200)
        #expect(send(["token": .string(token), "fid": .string("installation-1")]) == 400)
        #expect(send(["data": .object(["type": .string("DOSE_TAKEN")])]) == 400)
    }
}

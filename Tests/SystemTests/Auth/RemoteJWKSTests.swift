import Codecs
import OpenSSLCrypto
import JOSE
import FunctionRuntime
import CaregiverPush
import Foundation
import Synchronization
import Testing
import TestSupport

/// `SUPABASE_JWKS_URL`: the built `push-register` fetching a Supabase-like JWKS from the emulator, with the document
/// shared through PostgreSQL. Rotation is the test PUTting the next key set; "after ten minutes" and "after an
/// hour" are the cached row aged in the database, so the real durations are what is tested.
@Suite("JWKS by URL")
struct RemoteJWKSTests {
    let fake: FCMFake
    let inUse: PrivateKey
    let standby: PrivateKey

    init() throws {
        fake = try FCMFake(tls: true)  // fetched over HTTPS, as from Supabase
        inUse = try PrivateKey.generateP256()
        standby = try PrivateKey.generateP256()
    }

    /// Only the URL verifies caregiver tokens (no HS256 secret).
    var environment: [String: String] {
        testEnvironment([
            "SUPABASE_JWT_SECRET": nil, "SUPABASE_JWKS_URL": fake.jwksURL, "SSL_CERT_FILE": fake.caFile,
        ])
    }

    @Test("a token signed by the in-use key is accepted; one fetch serves the following invocations")
    func inUseKey() throws {
        try fake.serveJWKS(keys: [inUse.jwk(kid: "in-use")])
        let token = try accessToken(.ec(inUse, kid: "in-use"))
        let first = try register(token)
        #expect(first.response?.statusCode == 200)
        #expect(try fake.jwksFetches == 1)
        #expect(try register(token).response?.statusCode == 200)
        #expect(try fake.jwksFetches == 1, "the second process must use the document cached in PostgreSQL")
        #expect(first.stderr.contains("caregiver signing keys fetched"))
        let publicX = try #require(try inUse.jwk(kid: "in-use")["x"]?.stringValue)
        for secret in [token, publicX] { #expect(!first.stderr.contains(secret)) }
    }

    @Test(
        "rotation: standby → in use → previously used all verify without a restart; revoked is refused after the refresh"
    )
    func rotation() throws {
        let old = Key(inUse, "key-a")
        let new = Key(standby, "key-b")
        // In use A, standby B: Supabase publishes the standby key before it signs anything.
        try fake.serveJWKS(keys: [old.jwk(), new.jwk()])
        #expect(try register(old.token()).response?.statusCode == 200)
        #expect(try register(new.token()).response?.statusCode == 200)
        // Rotated: B in use, A previously used (still published, so its unexpired tokens keep working).
        try fake.serveJWKS(keys: [new.jwk(), old.jwk()])
        #expect(try register(old.token()).response?.statusCode == 200)
        #expect(try register(new.token()).response?.statusCode == 200)
        // A revoked: the cached set still has it until the 10-minute refresh, then it is gone.
        try fake.serveJWKS(keys: [new.jwk()])
        let fetches = try fake.jwksFetches
        #expect(try register(old.token()).response?.statusCode == 200)
        try ageCachedKeys(by: RemoteJWKS.refreshInterval + 1)
        let revoked = try register(old.token())
        #expect(revoked.response?.statusCode == 401)
        #expect(revoked.stderr.contains(#""auth.reason":"unknownKey""#))
        #expect(try fake.jwksFetches == fetches + 1)
        #expect(try register(new.token()).response?.statusCode == 200)
        // A key put in use with no standby period is picked up by the unknown-kid refetch (once 30 s have passed).
        let direct = Key(try PrivateKey.generateP256(), "key-c")
        try fake.serveJWKS(keys: [direct.jwk(), new.jwk()])
        try ageCachedKeys(by: RemoteJWKS.retryInterval + 1)
        #expect(try register(direct.token()).response?.statusCode == 200)
    }

    @Test("a warm process follows rotation and revocation with its clock, without a restart")
    func warmProcess() throws {
        let old = Key(inUse, "warm-a")
        let new = Key(standby, "warm-b")
        try fake.serveJWKS(keys: [old.jwk()])
        let warm = WarmFunction(environment: environment)
        let start = Date()
        #expect(try warm.register(old.token(), at: start) == 200)
        #expect(try warm.register(old.token(), at: start + 5) == 200)
        #expect(try fake.jwksFetches == 1)
        // B comes into use; the process learns it from the unknown kid, 30 s after the last fetch.
        try fake.serveJWKS(keys: [new.jwk(), old.jwk()])
        #expect(try warm.register(new.token(), at: start + 10) == 401, "no refetch within 30 s of the last one")
        #expect(try warm.register(new.token(), at: start + RemoteJWKS.retryInterval + 1) == 200)
        // A revoked: still trusted from memory until ten minutes after the last fetch, refused after.
        try fake.serveJWKS(keys: [new.jwk()])
        let fetched = start + RemoteJWKS.retryInterval + 1
        #expect(try warm.register(old.token(), at: fetched + 60) == 200)
        #expect(try warm.register(old.token(), at: fetched + RemoteJWKS.refreshInterval + 1) == 401)
        #expect(try warm.register(new.token(), at: fetched + RemoteJWKS.refreshInterval + 2) == 200)
    }

    @Test("100 tokens with random unknown kids, from many processes at once, cause one refetch in 30 s")
    func unknownKeyIDs() throws {
        try fake.serveJWKS(keys: [inUse.jwk(kid: "in-use")])
        #expect(try register(try accessToken(.ec(inUse, kid: "in-use"))).response?.statusCode == 200)
        // The last fetch was over 30 s ago: one refetch is allowed, and only one.
        try ageCachedKeys(by: RemoteJWKS.retryInterval + 1)
        let before = try fake.jwksFetches
        let forger = try PrivateKey.generateP256()
        let tokens = try (0..<100).map { _ in try accessToken(.ec(forger, kid: UUID().uuidString)) }
        let statuses = Mutex<[Int]>([])
        let environment = self.environment
        DispatchQueue.concurrentPerform(iterations: 10) { worker in
            for token in tokens[(worker * 10)..<(worker * 10 + 10)] {
                let status = (try? Self.register(token, environment: environment))?.response?.statusCode ?? -1
                statuses.withLock { $0.append(status) }
            }
        }
        #expect(statuses.withLock { $0 } == [Int](repeating: 401, count: 100))
        #expect(try fake.jwksFetches - before == 1)
    }

    @Test("a warm process refuses unknown kids within the fetch cooldown without asking the database")
    func unknownKeyIDsCostNoDatabaseWork() throws {
        try fake.serveJWKS(keys: [inUse.jwk(kid: "in-use")])
        let warm = WarmFunction(environment: environment)
        let start = Date()
        #expect(try warm.register(try accessToken(.ec(inUse, kid: "in-use")), at: start) == 200)
        let fetches = try fake.jwksFetches
        // Anyone reading jwks_cache now waits for this lock until its lock timeout, and fails.
        let blocker = try TestDatabase.connect()
        defer { blocker.close() }
        try blocker.query("BEGIN")
        try blocker.query("LOCK TABLE jwks_cache IN ACCESS EXCLUSIVE MODE")
        let forger = try PrivateKey.generateP256()
        var statuses: [Int] = []
        for index in 0..<20 {
            let token = try accessToken(.ec(forger, kid: "forged-\(index)"))
            statuses.append(try warm.register(token, at: start + 1 + Double(index)))
        }
        try blocker.query("ROLLBACK")
        #expect(statuses == [Int](repeating: 401, count: 20))
        #expect(try fake.jwksFetches == fetches)
        // Once the cooldown is over, an unknown kid may refetch — once.
        let late = try accessToken(.ec(forger, kid: "forged-late"))
        #expect(try warm.register(late, at: start + RemoteJWKS.retryInterval + 1) == 401)
        #expect(try warm.register(late, at: start + RemoteJWKS.retryInterval + 2) == 401)
        #expect(try fake.jwksFetches == fetches + 1)
    }

    @Test("endpoint down: the cached keys keep working for an hour, then tokens are refused with a log line")
    func endpointDown() throws {
        try fake.serveJWKS(keys: [inUse.jwk(kid: "in-use")])
        let token = try accessToken(.ec(inUse, kid: "in-use"))
        #expect(try register(token).response?.statusCode == 200)
        try fake.setJWKSDown(true)
        try ageCachedKeys(by: RemoteJWKS.refreshInterval + 1)
        let stale = try register(token)
        #expect(stale.response?.statusCode == 200)
        #expect(stale.stderr.contains("caregiver signing keys could not be fetched"))
        #expect(try fake.jwksFetches == 2)
        try ageCachedKeys(by: RemoteJWKS.staleLimit)
        let refused = try register(token)
        #expect(refused.response?.statusCode == 401)
        #expect(refused.response?.headers["content-type"] == "application/problem+json")
        #expect(refused.stderr.contains(#""auth.reason":"keySetStale""#))
        #expect(!refused.stderr.contains(token))
        // Back up: the next attempt (30 s after the last) restores service.
        try fake.setJWKSDown(false)
        try ageCachedKeys(by: RemoteJWKS.retryInterval + 1, fetched: false)
        #expect(try register(token).response?.statusCode == 200)
    }

    @Test("an oversized or non-JWKS document is never adopted: the last good set is kept")
    func badDocuments() throws {
        let token = try accessToken(.ec(inUse, kid: "in-use"))
        let padding = String(repeating: "x", count: 70 * 1024)
        try fake.serveJWKS(#"{"keys":[\#(TokenFixture.text(inUse.jwk(kid: "in-use")))],"pad":"\#(padding)"}"#)
        let oversized = try register(token)
        #expect(oversized.response?.statusCode == 401)
        #expect(oversized.stderr.contains(#""auth.reason":"keySetUnavailable""#))
        try fake.serveJWKS(keys: [inUse.jwk(kid: "in-use")])
        try ageCachedKeys(by: RemoteJWKS.retryInterval + 1, fetched: false)
        #expect(try register(token).response?.statusCode == 200)
        try fake.serveJWKS("<html>maintenance</html>")
        try ageCachedKeys(by: RemoteJWKS.refreshInterval + 1)
        #expect(try register(token).response?.statusCode == 200)
    }

    @Test("Ed25519: a token is accepted; an Ed25519 key whose alg is ES256 is skipped and its tokens refused")
    func ed25519() throws {
        let good = try PrivateKey.generateEd25519()
        let mislabelled = try PrivateKey.generateEd25519()
        guard case .object(var wrong) = try mislabelled.jwk(kid: "ed-es256") else { return }
        wrong["alg"] = .string("ES256")
        try fake.serveJWKS(keys: [good.jwk(kid: "ed-good"), .object(wrong)])
        #expect(try good.jwk(kid: "ed-good")["alg"] == .string("EdDSA"))
        #expect(try register(accessToken(.ed25519(good, kid: "ed-good"))).response?.statusCode == 200)
        let refused = try register(accessToken(.ed25519(mislabelled, kid: "ed-es256")))
        #expect(refused.response?.statusCode == 401)
        #expect(refused.stderr.contains(#""jwks.kid":"ed-es256""#))
        #expect(refused.stderr.contains(#""jwks.reason":"algorithmMismatch""#))
        // Nor can the mislabelled key's tokens pass by claiming its alg.
        let claimed = try fake.jwksFetches
        let es256Claim = try TokenFixture().handBuilt(
            header: #"{"alg":"ES256","kid":"ed-es256"}"#, payload: TokenFixture.text(.object(claims())),
            using: .ed25519(mislabelled, kid: nil))
        #expect(try register(es256Claim).response?.statusCode == 401)
        #expect(try fake.jwksFetches == claimed)
    }

    @Test("one unusable key beside good ones: the good ones still verify, by URL and inline, and HS256 is no 500")
    func unusableKeyBesideGoodOnes() throws {
        let unusable = try TokenFixture.unusableKeys()
        let keys = unusable + [try inUse.jwk(kid: "in-use")]
        let token = try accessToken(.ec(inUse, kid: "in-use"))
        try fake.serveJWKS(keys: keys)
        let byURL = try register(token)
        #expect(byURL.response?.statusCode == 200)
        #expect(byURL.stderr.components(separatedBy: "signing key skipped").count - 1 == unusable.count)
        // The same set pasted into SUPABASE_JWKS beside the HS256 secret: neither kind of token is refused for it.
        let inline = testEnvironment(["SUPABASE_JWKS": try TokenFixture.text(.object(["keys": .array(keys)]))])
        for bearer in [token, try caregiverToken(UUID())] {
            let run = try Executables.run(
                "push-register", input: makeEvent(bearer: bearer, body: Self.body()), environment: inline)
            #expect(run.response?.statusCode == 200)
            #expect(run.stderr.contains(#""jwks.reason":"weakKey""#))
        }
    }

    // MARK: helpers

    /// A key and its `kid`, as a rotation step publishes and signs with it.
    struct Key {
        let privateKey: PrivateKey
        let id: String
        init(_ privateKey: PrivateKey, _ id: String) {
            self.privateKey = privateKey
            self.id = id
        }
        func jwk() throws -> JSONValue { try privateKey.jwk(kid: id) }
        func token() throws -> String { try accessToken(.ec(privateKey, kid: id)) }
    }

    static func body() -> String {
        json(["token": .string(makeDeviceToken()), "platform": .string("ios"), "environment": .string("DEV")])
    }

    func register(_ token: String) throws -> Executables.Run {
        try Self.register(token, environment: environment)
    }

    static func register(_ token: String, environment: [String: String]) throws -> Executables.Run {
        try Executables.run(
            "push-register", input: makeEvent(bearer: token, body: body()), environment: environment)
    }

    /// Moves this URL's cached row into the past, as if that much time had gone by.
    func ageCachedKeys(by seconds: TimeInterval, fetched: Bool = true) throws {
        let interval = "\(Int(seconds)) seconds"
        try TestDatabase.with { connection in
            try connection.query(
                """
                UPDATE jwks_cache
                SET attempted_at = attempted_at - \(interval)::interval,
                    fetched_at = CASE WHEN \(fetched) THEN fetched_at - \(interval)::interval ELSE fetched_at END
                WHERE url = \(fake.jwksURL)
                """)
        }
    }
}

/// Supabase access-token claims for a new caregiver, valid for an hour from now.
private func claims() -> [String: JSONValue] {
    let now = Date().timeIntervalSince1970.rounded(.down)
    return [
        "sub": .string(UUID().uuidString.lowercased()), "aud": .string("authenticated"),
        "role": .string("authenticated"), "iat": .number(now), "exp": .number(now + 3600),
        "is_anonymous": .bool(false),
    ]
}

private func accessToken(_ key: JWTSigningKey) throws -> String {
    try JWTSigner.sign(claims: claims(), using: key)
}

/// One `FunctionHandler` for many invocations: a warm process, whose clock the test sets.
private final class WarmFunction {
    let handler: FunctionHandler<PushRegister>
    let database: DatabaseSession
    let push: PushResources

    init(environment: [String: String]) {
        _ = TestDatabase.migrated
        let configuration = Configuration(environment: environment)
        handler = FunctionHandler(
            endpoint: PushRegister(), configuration: configuration,
            logger: CapturedLog().logger(function: "push-register"))
        database = DatabaseSession(configuration: configuration)
        push = PushResources(configuration: configuration)
    }

    deinit { database.close() }

    func register(_ token: String, at now: Date) throws -> Int {
        let event = makeEvent(bearer: token, body: RemoteJWKSTests.body())
        let resources = FunctionResources(database: database, push: push)
        var status = 0
        handler.handle(InvocationInput(eventBytes: Array(event), now: now), resources: resources) {
            status = $0.statusCode
        }
        return status
    }
}

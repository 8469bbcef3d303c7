import Codecs
import OpenSSLCrypto
import JOSE
import FunctionRuntime
import CaregiverPush
import Foundation
import Synchronization
import Testing
import TestFixtures
import TestSupport

/// `SUPABASE_JWKS_URL`: the built `push-register` fetching a Supabase-like JWKS from the emulator, each process for
/// itself, the refetch rate limit shared through PostgreSQL. Rotation is the test PUTting the next key set; "after
/// ten minutes" and "after an hour" are a warm process's invocations at chosen instants, so the real durations are
/// what is tested.
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

    @Test("a token signed by the in-use key is accepted; a process fetches once, for itself, and serves on from it")
    func inUseKey() throws {
        try fake.serveJWKS(keys: [inUse.jwk(kid: "in-use")])
        let token = try accessToken(.ec(inUse, kid: "in-use"))
        let first = try register(token)
        #expect(first.response?.statusCode == 200)
        #expect(try fake.jwksFetches == 1)
        // Another process trusts no copy but its own.
        #expect(try register(token).response?.statusCode == 200)
        #expect(try fake.jwksFetches == 2)
        let warm = WarmFunction(environment: environment)
        for offset in [0.0, 5, 60] { #expect(try warm.register(token, at: Date() + offset) == 200) }
        #expect(try fake.jwksFetches == 3)
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
        // A revoked: a process that fetches now no longer has it (a warm one: within its ten minutes, below).
        try fake.serveJWKS(keys: [new.jwk()])
        let revoked = try register(old.token())
        #expect(revoked.response?.statusCode == 401)
        #expect(revoked.stderr.contains(#""auth.reason":"unknownKey""#))
        #expect(try register(new.token()).response?.statusCode == 200)
        // A key put in use with no standby period.
        let direct = Key(try PrivateKey.generateP256(), "key-c")
        try fake.serveJWKS(keys: [direct.jwk(), new.jwk()])
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

    @Test("100 tokens with random unknown kids, in ten warm processes at once, cause one refetch in 30 s")
    func unknownKeyIDs() throws {
        try fake.serveJWKS(keys: [inUse.jwk(kid: "in-use")])
        let start = Date()
        let workers = (0..<10).map { _ in WarmFunction(environment: environment) }
        for worker in workers {
            #expect(try worker.register(try accessToken(.ec(inUse, kid: "in-use")), at: start) == 200)
        }
        // Each process fetched for itself, once. Over 30 s later, forged kids: one refetch among them all.
        #expect(try fake.jwksFetches == 10)
        let forger = try PrivateKey.generateP256()
        let tokens = try (0..<100).map { _ in try accessToken(.ec(forger, kid: UUID().uuidString)) }
        let statuses = Mutex<[Int]>([])
        let later = start + RemoteJWKS.retryInterval + 1
        DispatchQueue.concurrentPerform(iterations: 10) { index in
            for token in tokens[(index * 10)..<(index * 10 + 10)] {
                let status = (try? workers[index].register(token, at: later)) ?? -1
                statuses.withLock { $0.append(status) }
            }
        }
        #expect(statuses.withLock { $0 } == [Int](repeating: 401, count: 100))
        #expect(try fake.jwksFetches == 11)
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

    @Test("endpoint down: a process's keys keep working for an hour, then tokens are refused with a log line")
    func endpointDown() throws {
        try fake.serveJWKS(keys: [inUse.jwk(kid: "in-use")])
        let token = try accessToken(.ec(inUse, kid: "in-use"))
        let warm = WarmFunction(environment: environment)
        let start = Date()
        #expect(try warm.register(token, at: start) == 200)
        try fake.setJWKSDown(true)
        #expect(try warm.register(token, at: start + RemoteJWKS.refreshInterval + 1) == 200)
        #expect(try fake.jwksFetches == 2)
        let past = start + RemoteJWKS.staleLimit + 1
        #expect(try warm.register(accessToken(.ec(inUse, kid: "in-use"), issued: past), at: past) == 401)
        // A cold process with the endpoint down has nothing to trust: refused, with the reason logged.
        let refused = try register(token)
        #expect(refused.response?.statusCode == 401)
        #expect(refused.response?.headers["content-type"] == "application/problem+json")
        #expect(refused.stderr.contains(#""auth.reason":"keySetUnavailable""#))
        #expect(refused.stderr.contains("caregiver signing keys could not be fetched"))
        #expect(!refused.stderr.contains(token))
        // Back up: the warm process's next attempt (30 s after its last) restores service.
        try fake.setJWKSDown(false)
        let fetchesBefore = try fake.jwksFetches
        let back = start + RemoteJWKS.staleLimit + RemoteJWKS.retryInterval + 2
        #expect(try warm.register(accessToken(.ec(inUse, kid: "in-use"), issued: back), at: back) == 200)
        #expect(try fake.jwksFetches == fetchesBefore + 1)
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
        let warm = WarmFunction(environment: environment)
        let start = Date()
        #expect(try warm.register(token, at: start) == 200)
        try fake.serveJWKS("<html>maintenance</html>")
        #expect(try warm.register(token, at: start + RemoteJWKS.refreshInterval + 1) == 200)
        #expect(try register(token).response?.statusCode == 401)
    }

    @Test("a key set written into jwks_cache by whoever can write it, dated 2100: the forged token 401, the real 200")
    func writtenKeySetIsNotTrusted() throws {
        try fake.serveJWKS(keys: [inUse.jwk(kid: "in-use")])
        let real = try accessToken(.ec(inUse, kid: "in-use"))
        let forger = try PrivateKey.generateP256()
        let forged = try accessToken(.ec(forger, kid: "attacker"))
        let attack = try TokenFixture.text(.object(["keys": .array([forger.jwk(kid: "attacker")])]))
        // What the runtime role (every function's DATABASE_URL) can write: its own key set, fetched and attempted in
        // the year 2100; the real key set left out.
        try TestDatabase.with { connection in
            try connection.query(
                """
                INSERT INTO jwks_cache (url, document, fetched_at, attempted_at)
                VALUES (\(fake.jwksURL), \(attack), '2100-01-01T00:00:00Z', '2100-01-01T00:00:00Z')
                ON CONFLICT (url) DO UPDATE SET document = EXCLUDED.document, fetched_at = EXCLUDED.fetched_at,
                    attempted_at = EXCLUDED.attempted_at
                """)
        }
        for _ in 0..<2 {
            #expect(try register(forged).response?.statusCode == 401)
            #expect(try register(real).response?.statusCode == 200)
        }
        // A warm process past the unknown-kid cooldown: still only what it fetched; the future attempt is overwritten,
        // not obeyed.
        let warm = WarmFunction(environment: environment)
        let start = Date()
        #expect(try warm.register(real, at: start) == 200)
        #expect(try warm.register(forged, at: start + RemoteJWKS.retryInterval + 1) == 401)
        #expect(try warm.register(real, at: start + RemoteJWKS.retryInterval + 2) == 200)
        let attempted = try TestDatabase.with { connection in
            try connection.query("SELECT attempted_at < '2100-01-01' FROM jwks_cache WHERE url = \(fake.jwksURL)")[0]
                .decode(Bool.self, at: 0)
        }
        #expect(attempted)
    }

    @Test("a writer keeping jwks_cache.attempted_at at now holds a warm process's refetch back a minute at most")
    func sharedLimitHoldsBackBriefly() throws {
        let old = Key(inUse, "held-a")
        let new = Key(standby, "held-b")
        try fake.serveJWKS(keys: [old.jwk()])
        let warm = WarmFunction(environment: environment)
        let start = Date()
        #expect(try warm.register(old.token(), at: start) == 200)
        try fake.serveJWKS(keys: [new.jwk(), old.jwk()])
        // What the runtime role can do before every request: say some process has just tried.
        func claimNow(_ now: Date) throws {
            try TestDatabase.with { connection in
                try connection.query(
                    """
                    INSERT INTO jwks_cache (url, attempted_at) VALUES (\(fake.jwksURL), \(now))
                    ON CONFLICT (url) DO UPDATE SET attempted_at = EXCLUDED.attempted_at
                    """)
            }
        }
        try claimNow(start + RemoteJWKS.retryInterval + 1)
        #expect(try warm.register(new.token(), at: start + RemoteJWKS.retryInterval + 1) == 401)
        #expect(try fake.jwksFetches == 1, "within the minute the shared limit is obeyed")
        try claimNow(start + RemoteJWKS.ownRetryCeiling + 1)
        #expect(try warm.register(new.token(), at: start + RemoteJWKS.ownRetryCeiling + 1) == 200)
        #expect(try fake.jwksFetches == 2)
    }

    @Test("pinned: a key the endpoint publishes but SUPABASE_JWKS_PINS does not name is refused; a pinned one verifies")
    func pinnedKeys() throws {
        let pinned = Key(inUse, "pin-a")
        let unpinned = Key(standby, "pin-b")
        try fake.serveJWKS(keys: [pinned.jwk(), unpinned.jwk()])
        let thumbprint = try #require(
            try JWKS(json: TokenFixture.text(.object(["keys": .array([pinned.jwk()])]))).key(id: "pin-a")?.thumbprint)
        var pinnedEnvironment = environment
        pinnedEnvironment["SUPABASE_JWKS_PINS"] = "sha-of-another-key, \(thumbprint)"
        #expect(try Self.register(pinned.token(), environment: pinnedEnvironment).response?.statusCode == 200)
        let refused = try Self.register(unpinned.token(), environment: pinnedEnvironment)
        #expect(refused.response?.statusCode == 401)
        #expect(refused.stderr.contains("caregiver signing keys not pinned are left out"))
        // Unpinned, the same endpoint's second key verifies.
        #expect(try register(unpinned.token()).response?.statusCode == 200)
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
        // One fetch, that cold process's own; the claimed alg does not make it ask again.
        #expect(try register(es256Claim).response?.statusCode == 401)
        #expect(try fake.jwksFetches == claimed + 1)
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

}

/// Supabase access-token claims for a new caregiver, valid for an hour from `issued`.
private func claims(issued: Date = Date()) -> [String: JSONValue] {
    let now = issued.timeIntervalSince1970.rounded(.down)
    return [
        "sub": .string(UUID().uuidString.lowercased()), "aud": .string("authenticated"),
        "role": .string("authenticated"), "iat": .number(now), "exp": .number(now + 3600),
        "is_anonymous": .bool(false),
    ]
}

private func accessToken(_ key: JWTSigningKey, issued: Date = Date()) throws -> String {
    try JWTSigner.sign(claims: claims(issued: issued), using: key)
}

/// One `EndpointHandler` for many invocations: a warm process, whose clock the test sets. Unchecked: a test hands
/// each one to one thread at a time, as a process serves one invocation at a time.
private final class WarmFunction: @unchecked Sendable {
    let handler: EndpointHandler<PushRegister>

    init(environment: [String: String]) {
        _ = TestDatabase.migrated
        let configuration = Configuration(environment: environment)
        handler = EndpointHandler(
            PushRegister(),
            service: CaregiverService(
                configuration: configuration, logger: CapturedLog().logger(function: "push-register")))
    }

    deinit { handler.service.close() }

    func register(_ token: String, at now: Date) throws -> Int {
        let event = makeEvent(bearer: token, body: RemoteJWKSTests.body())
        var status = 0
        let writer = ResponseWriter<APIGatewayV2Response>.inMemory(logger: handler.logger) { status = $0.statusCode }
        handler.handle(InvocationInput(eventBytes: Array(event), now: now), writer: writer)
        return status
    }
}

import Libpq
import Curl
import JOSE
import FoundationEssentials
import Logging

/// The key set published at `SUPABASE_JWKS_URL`, fetched over HTTPS by each process itself.
///
/// Supabase rotates its signing keys (standby → in use → previously used → revoked) and asks clients to cache its
/// JWKS for about ten minutes, as its edge does. A process uses only a document it fetched itself, for
/// ``refreshInterval``, and keeps the last good one while the endpoint fails, for ``staleLimit``; every age is the
/// process's own clock since its own fetch. Nothing read from the database can add a key or make one last longer:
/// whoever can write `jwks_cache` (the runtime role, a pooler, a mistaken exposure) can no more make a forged token
/// pass than anyone else (docs/behaviour.md#auth-jwks-url).
///
/// What processes share is the fetch rate limit only: a token naming a `kid` that the process's fresh set lacks
/// causes a refetch only when no process has tried one for ``retryInterval`` — one conditional upsert of
/// `jwks_cache.attempted_at` decides it — so forged `kid`s cannot make this service hammer Supabase. A cold process
/// fetches once, when its first caregiver token needs keys. An `attempted_at` in the future (a row someone wrote) is
/// overwritten, never obeyed; and a process whose own last attempt is ``ownRetryCeiling`` old fetches whatever the
/// row says, so a writer who keeps `attempted_at` at "now" delays a newly used key by a minute at most, at the cost
/// of one fetch per process and minute while it does.
///
/// Not `Sendable`: it holds a parsed ``JWKS``; one per process, kept by the ``Authenticator``.
public final class RemoteJWKS {
    /// How long a fetched document is used before it is fetched again (Supabase's own edge cache time).
    public static let refreshInterval: TimeInterval = 600
    /// How long a document is still trusted when it cannot be refreshed.
    public static let staleLimit: TimeInterval = 3600
    /// The shortest time between two fetch attempts: of one process, and of all of them for an unknown `kid`.
    public static let retryInterval: TimeInterval = 30
    /// How long the shared limit may hold this process back: past this since its own last attempt, it fetches for
    /// an unknown `kid` whatever `jwks_cache` says.
    public static let ownRetryCeiling: TimeInterval = 60
    /// Bound on one fetch, connection included.
    static let fetchTimeoutMilliseconds = 2000
    /// Largest document accepted (Supabase's are a few hundred bytes per key).
    static let documentLimit = 64 * 1024

    /// `SUPABASE_JWKS_URL`.
    public let url: String
    /// Whom the endpoint's certificate must chain to (`SSL_CERT_FILE`, or the system bundle).
    public let trust: TrustStore
    /// The last good document this process fetched, and when (by the invocation's clock).
    private var current: (keys: JWKS, fetchedAt: Date)?
    /// Until this instant this process does not fetch, nor ask the database whether it may: one instant, whatever
    /// the number of forged `kid`s, so a flood of them costs one conditional write per cooldown and process.
    private var quietUntil: Date?
    /// This process's own last fetch attempt, good or not.
    private var attemptedAt: Date?

    /// `SUPABASE_JWKS_PINS`: the only thumbprints trusted from the document; `nil`: every key it publishes.
    public let pins: Set<String>?

    public init(url: String, trust: TrustStore = .process, pins: Set<String>? = nil) {
        self.url = url
        self.trust = trust
        self.pins = pins
    }

    /// The key set to look a token's `kid` up in.
    /// - Parameters:
    ///   - keyID: the token's `kid`; when the set lacks it, a refetch is tried (at most once per ``retryInterval``,
    ///     across processes).
    ///   - database: where the shared rate limit lives.
    ///   - now: the invocation's clock.
    /// - Returns: the newest usable set, which may still lack `keyID`.
    /// - Throws: ``RemoteJWKSUnavailable`` when this process has no document younger than ``staleLimit``;
    ///   ``PostgresError`` when the rate limit cannot be read or written.
    public func keys(for keyID: String, database: DatabaseSession, now: Date, logger: Logger) throws -> JWKS {
        let fresh = current.map { now.timeIntervalSince($0.fetchedAt) < Self.refreshInterval } ?? false
        if fresh, let current, current.keys.key(id: keyID) != nil { return current.keys }
        if let quietUntil, now < quietUntil {
            logger.debug("unknown key id within the fetch cooldown; database not asked")
            return try usableKeys(now: now)
        }
        quietUntil = now.addingTimeInterval(Self.retryInterval)
        // No document, or one past its refresh: this process fetches (at most once per retry interval). A fresh
        // document lacking the `kid`: only when no process has tried within the retry interval.
        let ownDue = attemptedAt.map { now.timeIntervalSince($0) >= Self.ownRetryCeiling } ?? true
        if fresh, try !claimRefetch(database: database, now: now), !ownDue {
            logger.debug("unknown key id: another process refetched within the cooldown")
            return try usableKeys(now: now)
        }
        fetch(now: now, logger: logger)
        return try usableKeys(now: now)
    }

    /// The process's copy, when one younger than ``staleLimit`` is at hand.
    private func usableKeys(now: Date) throws -> JWKS {
        guard let current else { throw RemoteJWKSUnavailable(age: nil) }
        let age = now.timeIntervalSince(current.fetchedAt)
        guard age <= Self.staleLimit else { throw RemoteJWKSUnavailable(age: age) }
        return current.keys
    }

    /// Takes the shared refetch slot: true when no process tried within ``retryInterval`` of `now` (or the row's
    /// instant lies in the future, which no process wrote), and the row now says `now`. One statement: the row lock
    /// of the upsert serialises concurrent claims, so one of them wins.
    private func claimRefetch(database: DatabaseSession, now: Date) throws -> Bool {
        let earliest = now.addingTimeInterval(-Self.retryInterval)
        return try database.withTransaction { connection in
            try !connection.query(
                """
                INSERT INTO caregiver_push.jwks_cache AS c (url, attempted_at) VALUES (\(url), \(now))
                ON CONFLICT (url) DO UPDATE SET attempted_at = EXCLUDED.attempted_at
                WHERE c.attempted_at <= \(earliest) OR c.attempted_at > EXCLUDED.attempted_at
                RETURNING 1
                """
            ).isEmpty
        }
    }

    /// Fetches the document; a good one replaces the process's copy. A failure keeps the last good document.
    private func fetch(now: Date, logger: Logger) {
        attemptedAt = now
        switch download() {
        case .success(let published):
            published.logSkippedKeys(logger, source: "SUPABASE_JWKS_URL")
            let keys = JWKS.pinned(published, to: pins, source: "SUPABASE_JWKS_URL", logger: logger)
            current = (keys, now)
            logger.info(
                "caregiver signing keys fetched",
                metadata: [
                    "jwks.keys": .stringConvertible(keys.keyIDs.count),
                    "jwks.kids": .string(keys.keyIDs.map { String($0.prefix(64)) }.joined(separator: ",")),
                ])
        case .failure(let failure):
            var metadata: Logger.Metadata = ["jwks.failure": .string(failure.description)]
            if let fetchedAt = current?.fetchedAt {
                metadata["jwks.age_s"] = .stringConvertible(Int(now.timeIntervalSince(fetchedAt)))
            }
            logger.warning("caregiver signing keys could not be fetched; keeping the last good set", metadata: metadata)
        }
    }

    /// Why a fetch produced no key set. Names the failure, never the document.
    enum FetchFailure: Error, CustomStringConvertible {
        case transport(CurlError)
        case status(Int)
        case notAKeySet(JWKSError.Reason)

        var description: String {
            switch self {
            case .transport(let error): "transport: \(error.description)"
            case .status(let status): "HTTP \(status)"
            case .notAKeySet(let reason): "not a key set: \(reason.rawValue)"
            }
        }
    }

    /// One bounded GET of the document: 200, at most ``documentLimit`` bytes, a key set.
    private func download() -> Result<JWKS, FetchFailure> {
        let request = CurlRequest(
            url: url, headers: [("Accept", "application/json")], responseBodyLimit: Self.documentLimit, trust: trust)
        let response: CurlResponse
        switch CurlClient.perform(request, timeoutMilliseconds: Self.fetchTimeoutMilliseconds) {
        case .success(let value): response = value
        case .failure(let error): return .failure(.transport(error))
        }
        guard response.status == 200 else { return .failure(.status(response.status)) }
        let document = String(decoding: response.body, as: UTF8.self)
        do {
            return .success(try JWKS(json: document))
        } catch {
            return .failure(.notAKeySet(error.reason))
        }
    }
}

/// No `SUPABASE_JWKS_URL` key set young enough to trust: never fetched, or not refreshed within the stale limit.
/// Tokens that need it are refused (401), never answered with a 500.
public struct RemoteJWKSUnavailable: Error, Equatable {
    /// Seconds since the last good fetch; `nil` when none ever succeeded.
    public let age: TimeInterval?

    /// The `auth.reason` logged for a token refused for it.
    public var reason: String { age == nil ? "keySetUnavailable" : "keySetStale" }
}

extension JWKS {
    /// `keys` with only the pinned keys when `pins` is set, a warning naming the `kid`s left out.
    static func pinned(_ keys: JWKS, to pins: Set<String>?, source: String, logger: Logger) -> JWKS {
        guard let pins else { return keys }
        let (kept, left) = keys.keeping(thumbprints: pins)
        if !left.isEmpty {
            logger.warning(
                "caregiver signing keys not pinned are left out",
                metadata: [
                    "jwks.source": .string(source),
                    "jwks.kids": .string(left.map { String($0.prefix(64)) }.joined(separator: ",")),
                ])
        }
        return kept
    }
}

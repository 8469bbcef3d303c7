import Libpq
import Curl
import JOSE
import FoundationEssentials
import Logging

/// The key set published at `SUPABASE_JWKS_URL`, fetched over HTTPS and shared by every invocation.
///
/// Supabase rotates its signing keys (standby → in use → previously used → revoked) and asks clients to cache its
/// JWKS for about ten minutes, as its edge does. Modelled on ``AccessTokenProvider``: the document lives in
/// `jwks_cache` (keyed by URL) and, in a warm process, in memory too. It is refetched when ten minutes old, and
/// when a token names a `kid` the set lacks (a key that just came into use) — but a fetch is only ever tried when
/// the last attempt, by any process, is ``retryInterval`` old, so forged `kid`s cannot make this service hammer
/// Supabase. Fetching happens under a transaction-scoped advisory lock (never a session lock: the stack must work
/// behind PgBouncer's transaction pooling), and the row is read again once the lock is held, so that concurrent cold
/// invocations fetch once. When the endpoint is down or answers nonsense the last good document is kept; past
/// ``staleLimit`` without a good fetch it is no longer trusted and tokens are refused.
///
/// Not `Sendable`: it holds a parsed ``JWKS``; one per process, kept by the ``Authenticator``.
public final class RemoteJWKS {
    /// How long a fetched document is used before it is fetched again (Supabase's own edge cache time).
    public static let refreshInterval: TimeInterval = 600
    /// How long a document is still trusted when it cannot be refreshed.
    public static let staleLimit: TimeInterval = 3600
    /// The shortest time between two fetch attempts, across all processes (one unknown `kid` burst, one fetch).
    public static let retryInterval: TimeInterval = 30
    /// Bound on one fetch, connection included.
    static let fetchTimeoutMilliseconds = 2000
    /// Largest document accepted (Supabase's are a few hundred bytes per key).
    static let documentLimit = 64 * 1024
    /// First key of the advisory lock taken while fetching; the second is the URL's hash.
    static let lockNamespace = 0x4A57_4B53  // "JWKS"

    /// `SUPABASE_JWKS_URL`.
    public let url: String
    /// Whom the endpoint's certificate must chain to (`SSL_CERT_FILE`, or the system bundle).
    public let trust: TrustStore
    private var current: (document: String, keys: JWKS, fetchedAt: Date)?
    /// Until this instant no process may fetch (the shared row's last attempt plus ``retryInterval``), so the shared
    /// copy cannot change either: a `kid` the process's copy lacks is unknown until then without asking the
    /// database. This is the per-process negative cache of unknown `kid`s — one instant, whatever the number of
    /// forged `kid`s, so a flood of them costs one read per cooldown and process, not one per request.
    private var quietUntil: Date?
    /// Fetches this process made itself (for tests).
    public private(set) var fetchCount = 0
    /// Reads of the shared copy this process made (for tests).
    public private(set) var sharedReads = 0

    public init(url: String, trust: TrustStore = .process) {
        self.url = url
        self.trust = trust
    }

    /// The key set to look a token's `kid` up in.
    /// - Parameters:
    ///   - keyID: the token's `kid`; when the set lacks it, a refetch is tried (at most once per ``retryInterval``).
    ///   - database: where the shared copy lives.
    ///   - now: the invocation's clock.
    /// - Returns: the newest usable set, which may still lack `keyID`.
    /// - Throws: ``RemoteJWKSUnavailable`` when no document younger than ``staleLimit`` can be had;
    ///   ``PostgresError`` when the shared copy cannot be read or written.
    public func keys(for keyID: String, database: DatabaseSession, now: Date, logger: Logger) throws -> JWKS {
        if let current, now.timeIntervalSince(current.fetchedAt) < Self.refreshInterval,
            current.keys.key(id: keyID) != nil
        {
            return current.keys
        }
        // Unknown `kid` (or no document at all) within the quiet window: nothing new can be had yet.
        if let quietUntil, now < quietUntil {
            logger.debug("unknown key id within the fetch cooldown; database not asked")
            return try usableKeys(now: now)
        }
        let connection = try database.connection()
        // A transaction for the bounds its settings give the read, in one round trip.
        sharedReads += 1
        var stored = try Self.storedRow(in: connection.readOnlyTransaction(storedRowQuery))
        adopt(stored, logger: logger)
        if needsFetch(stored, keyID: keyID, now: now) {
            stored = try connection.withTransaction { connection in
                // Whoever holds the lock may be fetching: wait as long as one fetch may take, not the usual lock
                // bound. The holder is idle in its transaction during the HTTP call, for at most the fetch timeout.
                let timeout = Self.fetchTimeoutMilliseconds
                try connection.query(
                    """
                    SELECT set_config('lock_timeout', \(String(timeout + 1000)), true),
                           set_config('idle_in_transaction_session_timeout', \(String(timeout + 2000)), true)
                    """)
                try connection.query("SELECT pg_advisory_xact_lock(\(Self.lockNamespace), hashtext(\(url)))")
                let locked = try storedRow(connection)
                adopt(locked, logger: logger)
                guard needsFetch(locked, keyID: keyID, now: now) else { return locked }
                return try fetch(into: connection, previous: locked, now: now, logger: logger)
            }
            adopt(stored, logger: logger)
        }
        quietUntil = stored.map { $0.attemptedAt.addingTimeInterval(Self.retryInterval) }
        return try usableKeys(now: now)
    }

    /// The process's copy, when one younger than ``staleLimit`` is at hand.
    private func usableKeys(now: Date) throws -> JWKS {
        guard let current else { throw RemoteJWKSUnavailable(age: nil) }
        let age = now.timeIntervalSince(current.fetchedAt)
        guard age <= Self.staleLimit else { throw RemoteJWKSUnavailable(age: age) }
        return current.keys
    }

    /// The shared copy: the document (when one was ever fetched), when, and when a fetch was last tried.
    struct StoredRow {
        var document: String?
        var fetchedAt: Date?
        var attemptedAt: Date
    }

    private var storedRowQuery: PostgresQuery {
        "SELECT document, fetched_at, attempted_at FROM caregiver_push.jwks_cache WHERE url = \(url)"
    }

    private func storedRow(_ connection: PostgresConnection) throws -> StoredRow? {
        try Self.storedRow(in: connection.query(storedRowQuery))
    }

    private static func storedRow(in rows: PostgresRows) throws -> StoredRow? {
        guard let row = rows.single else { return nil }
        return StoredRow(
            document: try row.decode(String?.self, at: 0), fetchedAt: try row.decode(Date?.self, at: 1),
            attemptedAt: try row.decode(Date.self, at: 2))
    }

    /// Takes the stored document as the process's copy when it is newer; parses (and warns about its unusable
    /// keys) only when its text differs from the copy's.
    private func adopt(_ stored: StoredRow?, logger: Logger) {
        guard let stored, let document = stored.document, let fetchedAt = stored.fetchedAt else { return }
        if let current, current.fetchedAt >= fetchedAt { return }
        if let current, current.document == document {
            self.current = (document, current.keys, fetchedAt)
            return
        }
        // The row only ever holds documents that parsed when fetched.
        guard let keys = try? JWKS(json: document) else { return }
        keys.logSkippedKeys(logger, source: "SUPABASE_JWKS_URL")
        current = (document, keys, fetchedAt)
    }

    /// Whether to fetch: never when any process tried within ``retryInterval``; otherwise when there is no good
    /// document, it is ``refreshInterval`` old, or it lacks the token's `kid`.
    private func needsFetch(_ stored: StoredRow?, keyID: String, now: Date) -> Bool {
        guard let stored else { return true }
        guard now.timeIntervalSince(stored.attemptedAt) >= Self.retryInterval else { return false }
        guard let current, stored.document != nil else { return true }
        return now.timeIntervalSince(current.fetchedAt) >= Self.refreshInterval || current.keys.key(id: keyID) == nil
    }

    /// Fetches the document and records the attempt; a good document replaces the stored one. Runs with the lock
    /// held. Never throws for the fetch itself: a failure keeps the last good document.
    private func fetch(
        into connection: PostgresConnection, previous: StoredRow?, now: Date, logger: Logger
    ) throws -> StoredRow {
        fetchCount += 1
        var row = previous ?? StoredRow(document: nil, fetchedAt: nil, attemptedAt: now)
        row.attemptedAt = now
        switch download() {
        case .success(let (document, keys)):
            row.document = document
            row.fetchedAt = now
            logger.info(
                "caregiver signing keys fetched",
                metadata: [
                    "jwks.keys": .stringConvertible(keys.keyIDs.count),
                    "jwks.kids": .string(keys.keyIDs.map { String($0.prefix(64)) }.joined(separator: ",")),
                ])
        case .failure(let failure):
            var metadata: Logger.Metadata = ["jwks.failure": .string(failure.description)]
            if let fetchedAt = row.fetchedAt {
                metadata["jwks.age_s"] = .stringConvertible(Int(now.timeIntervalSince(fetchedAt)))
            }
            logger.warning("caregiver signing keys could not be fetched; keeping the last good set", metadata: metadata)
        }
        try connection.query(
            """
            INSERT INTO caregiver_push.jwks_cache (url, document, fetched_at, attempted_at)
            VALUES (\(url), \(row.document), \(row.fetchedAt), \(row.attemptedAt))
            ON CONFLICT (url) DO UPDATE
            SET document = EXCLUDED.document, fetched_at = EXCLUDED.fetched_at, attempted_at = EXCLUDED.attempted_at
            """)
        return row
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
    private func download() -> Result<(String, JWKS), FetchFailure> {
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
            return .success((document, try JWKS(json: document)))
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

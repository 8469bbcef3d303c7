import Codecs
import FoundationEssentials
import FunctionRuntime
import JOSE
import Libpq
import Logging
import OpenSSLCrypto

/// Turns an `Authorization` header into a ``Principal`` (docs/behaviour.md#auth), or a 401 that never says which check
/// failed.
///
/// One per process, kept across warm invocations (the process's ``CaregiverService`` owns it): `SUPABASE_JWKS` is parsed once, on
/// first use, and the `SUPABASE_JWKS_URL` set (``RemoteJWKS``) keeps its in-memory copy. The reason for a rejection
/// goes to the log as `auth.reason`; the token itself never does.
public final class Authenticator {
    private enum State {
        case unloaded
        case ready(CaregiverTokenVerifier, RemoteJWKS?)
        case misconfigured(ConfigurationError)
    }

    private let configuration: Configuration
    private var state = State.unloaded

    /// Reads nothing yet: the key sets are loaded by the first ``authenticate(_:database:now:logger:)``, which can log.
    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// Verifies the request's bearer token.
    /// - Parameters:
    ///   - request: the request; only its `Authorization` header is read.
    ///   - database: where patient sessions and the shared JWKS refetch limit are.
    ///   - now: the invocation's clock.
    ///   - logger: the invocation's log: the reason for a rejection goes there, never the token.
    /// - Throws: ``Problem`` 401; ``PostgresError`` when a patient session or the shared JWKS cannot be read;
    ///   ``ConfigurationError`` when no way to verify caregiver tokens is configured.
    public func authenticate(
        _ request: FunctionRequest, database: DatabaseSession, now: Date, logger: Logger
    ) throws -> Principal {
        switch try credential(request, database: database, now: now, logger: logger) {
        case .verified(let principal):
            return principal
        case .patientSession(let session):
            // A transaction of its own, though it is one read: only a transaction carries the session's bounds
            // (`SET LOCAL` lock and statement timeouts; a statement outside one gets the server's defaults, usually
            // none). Unbounded, a lookup stuck behind a lock (a migration's ALTER TABLE) would wait as long as the
            // host lets it, and behind a transaction-pooling proxy hold one of the pool's few server connections all
            // that time. In one flight (BEGIN with the settings, the read, COMMIT), this costs no round trip more
            // than the bare read did; SET without LOCAL is not an option: it would stay on the pooled server session
            // for whoever gets it next. A recording reads it in its own transaction instead
            // (``PatientSession/query``, ``RecordingTransaction/principal()``).
            let rows = try database.connection().readOnlyTransaction(logger: logger, session.query)
            return try session.principal(rows, logger: logger)
        }
    }

    /// What the request's bearer token proves without the database: a caregiver's verified token, or the patient
    /// session a well-formed patient token names, still to be looked up (``PatientSession``) — by
    /// ``authenticate(_:database:now:logger:)`` in a read of its own, or by a recording in its transaction's first
    /// flight, where the read costs no transaction of its own.
    /// - Throws: as ``authenticate(_:database:now:logger:)``; a patient token of the wrong shape is a 401 here.
    public func credential(
        _ request: FunctionRequest, database: DatabaseSession, now: Date, logger: Logger
    ) throws -> Credential {
        guard let token = Self.bearerToken(request.header("authorization")) else {
            logger.info("request rejected", metadata: ["auth.reason": "missingBearer"])
            throw Problem.unauthorized()
        }
        if token.hasPrefix(PatientSessionToken.prefix) {
            guard let token = PatientSessionToken(token) else {
                logger.info("request rejected", metadata: ["auth.reason": "malformedPatientToken"])
                throw Problem.unauthorized()
            }
            return .patientSession(PatientSession(token: token, now: now))
        }
        let (verifier, remote) = try load(logger: logger)
        do {
            let fetched = try remoteKeys(
                for: token, remote: remote, verifier: verifier, database: database, now: now, logger: logger)
            let identity = try verifier.verify(token, now: now, fetchedKeys: fetched)
            return .verified(.caregiver(id: identity.userID))
        } catch let rejection as TokenRejection {
            logger.info("request rejected", metadata: ["auth.reason": .string(rejection.reason.rawValue)])
            throw Problem.unauthorized()
        } catch let unavailable as RemoteJWKSUnavailable {
            var metadata: Logger.Metadata = [
                "auth.reason": .string(unavailable.reason), "config.variable": "SUPABASE_JWKS_URL",
            ]
            if let age = unavailable.age { metadata["jwks.age_s"] = .stringConvertible(Int(age)) }
            logger.error("request rejected: no trusted signing keys", metadata: metadata)
            throw Problem.unauthorized()
        }
    }

    /// The `SUPABASE_JWKS_URL` set for a token that names a key by `kid` and an asymmetric `alg`, when the inline set
    /// does not have that key; `nil` when the token needs no fetched key (HS256 tokens never cause a fetch).
    private func remoteKeys(
        for token: String, remote: RemoteJWKS?, verifier: CaregiverTokenVerifier, database: DatabaseSession, now: Date,
        logger: Logger
    ) throws -> JWKS? {
        guard let remote else { return nil }
        let header = try CaregiverTokenVerifier.header(of: token)
        guard header.asymmetricAlgorithm != nil, let keyID = header.keyID, !verifier.hasConfiguredKey(id: keyID)
        else { return nil }
        return try remote.keys(for: keyID, database: database, now: now, logger: logger)
    }

    /// Builds the verifier once per process. A `SUPABASE_JWKS` that is not a key set at all is logged as an error
    /// and left out when another way to verify tokens is configured (the secret, the URL), so that HS256 tokens
    /// still verify; with nothing else configured it is a configuration error (500), as a missing secret is.
    private func load(logger: Logger) throws(ConfigurationError) -> (CaregiverTokenVerifier, RemoteJWKS?) {
        if case .unloaded = state { state = makeState(logger: logger) }
        switch state {
        case .ready(let verifier, let remote): return (verifier, remote)
        case .misconfigured(let error): throw error
        case .unloaded: throw ConfigurationError(variable: "SUPABASE_JWKS", reason: "could not be loaded")
        }
    }

    private func makeState(logger: Logger) -> State {
        var jwks: JWKS?
        if let json = configuration.jwksJSON {
            do {
                let parsed = try JWKS(json: json)
                parsed.logSkippedKeys(logger, source: "SUPABASE_JWKS")
                jwks = JWKS.pinned(parsed, to: configuration.jwksPins, source: "SUPABASE_JWKS", logger: logger)
            } catch {
                let error = ConfigurationError(variable: "SUPABASE_JWKS", reason: "is not a JWKS document")
                guard configuration.jwtSecret != nil || configuration.jwksURL != nil else {
                    return .misconfigured(error)
                }
                logger.error(
                    "function is misconfigured; verifying with the other configured keys",
                    metadata: ["config.variable": "SUPABASE_JWKS", "config.reason": .string(error.reason)])
            }
        }
        if configuration.jwtIssuer == nil {
            // Unchecked, `iss` lets a token of any project signed with an accepted key in: PROD refuses to run so,
            // a development deployment says so once per process.
            guard configuration.pushEnvironment != .production else {
                return .misconfigured(
                    ConfigurationError(
                        variable: "SUPABASE_JWT_ISSUER",
                        reason: "is not set: with PUSH_ENVIRONMENT=PROD every token's issuer is checked "
                            + "(https://<project-ref>.supabase.co/auth/v1)"))
            }
            logger.warning(
                "SUPABASE_JWT_ISSUER is not set: tokens of any issuer are accepted (refused with PUSH_ENVIRONMENT=PROD)",
                metadata: ["config.variable": "SUPABASE_JWT_ISSUER"])
        }
        let verifier = CaregiverTokenVerifier(
            hs256Secret: configuration.jwtSecret.map { Array($0.utf8) }, jwks: jwks,
            audience: configuration.jwtAudience, issuer: configuration.jwtIssuer)
        return .ready(
            verifier,
            configuration.jwksURL.map {
                RemoteJWKS(url: $0, trust: configuration.trustStore, pins: configuration.jwksPins)
            })
    }

    /// The credentials of `Bearer <token>` (scheme case-insensitive, RFC 9110 §11.1), or `nil`.
    static func bearerToken(_ header: String?) -> String? {
        guard let header else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingOptionalWhitespace()
        return token.isEmpty ? nil : token
    }
}

/// What a bearer token proves before the database is asked (``Authenticator/credential(_:database:now:logger:)``).
public enum Credential {
    /// A caregiver's token, verified.
    case verified(Principal)
    /// A well-formed patient session token: a ``Principal`` once ``PatientSession/query`` finds its session.
    case patientSession(PatientSession)
}

/// The look-up of a patient's session token: its hash and the instant it must be unexpired at. The token itself
/// stays here; only its hash goes to the database, and neither to a log.
public struct PatientSession {
    private let hash: PostgresBytes
    private let now: Date

    init(token: PatientSessionToken, now: Date) {
        hash = PostgresBytes(token.hash)
        self.now = now
    }

    /// The read: the session's id and patient when it is unrevoked and unexpired at `now`, no row otherwise.
    public var query: PostgresQuery {
        "SELECT * FROM caregiver_push.find_patient_session(\(hash)::bytea, \(now)::text)"
    }

    /// The patient ``query`` found.
    /// - Throws: ``Problem`` 401 when it found none (logged as `unknownPatientSession`).
    public func principal(_ rows: PostgresRows, logger: Logger) throws -> Principal {
        guard let row = rows.single else {
            logger.info("request rejected", metadata: ["auth.reason": "unknownPatientSession"])
            throw Problem.unauthorized()
        }
        let (sessionID, patientID) = try row.decode((AppID, AppID).self)
        return .patient(id: patientID, sessionID: sessionID)
    }
}

/// A patient's opaque session token: `pst_` followed by 43 base64url characters (32 random bytes).
///
/// The database keeps only the SHA-256 of the whole token text, so a leaked table does not grant access, and a
/// token is found by hashing and looking the hash up — never by comparing secrets with `==`.
public struct PatientSessionToken: Sendable {
    public static let prefix = "pst_"
    /// The token as given to the patient's app. Never log it.
    public let text: String

    /// Accepts only the exact shape; anything else is not a patient token.
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count == 4 + 43, text.hasPrefix(Self.prefix),
            bytes.dropFirst(4).allSatisfy(Self.isBase64URLCharacter)
        else { return nil }
        self.text = text
    }

    private init(trusted text: String) {
        self.text = text
    }

    /// A new random token. - Throws: when the system's random source fails.
    public static func generate() throws -> PatientSessionToken {
        PatientSessionToken(trusted: prefix + Base64URL.encode(try SecureRandom.bytes(32)))
    }

    /// What the database stores and looks up.
    public var hash: [UInt8] { SHA256.hash(Array(text.utf8)) }

    static func isBase64URLCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default: false
        }
    }
}

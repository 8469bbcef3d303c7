import Foundation
import Logging

/// Turns an `Authorization` header into a ``Principal`` (SPEC §4), or a 401 that never says which check failed.
///
/// The reason for a rejection goes to the log as `auth.reason`; the token itself never does.
public final class Authenticator {
    private let verifier: CaregiverTokenVerifier

    /// - Throws: ``ConfigurationError`` when `SUPABASE_JWKS` is not a usable key set.
    public init(configuration: Configuration) throws {
        let jwks: JWKS?
        if let json = configuration.jwksJSON {
            do {
                jwks = try JWKS(json: json)
            } catch {
                throw ConfigurationError(variable: "SUPABASE_JWKS", reason: "is not a valid JWKS document")
            }
        } else {
            jwks = nil
        }
        verifier = CaregiverTokenVerifier(
            hs256Secret: configuration.jwtSecret.map { Array($0.utf8) }, jwks: jwks,
            audience: configuration.jwtAudience, issuer: configuration.jwtIssuer)
    }

    /// Verifies the request's bearer token.
    /// - Parameters:
    ///   - request: the request; only its `Authorization` header is read.
    ///   - context: for the clock, the log, and the database (patient sessions are looked up there).
    /// - Throws: ``Problem`` 401; ``PostgresError`` when a patient session cannot be looked up.
    public func authenticate(_ request: FunctionRequest, context: InvocationContext) throws -> Principal {
        guard let token = Self.bearerToken(request.header("authorization")) else {
            context.logger.info("request rejected", metadata: ["auth.reason": "missingBearer"])
            throw Problem.unauthorized()
        }
        if token.hasPrefix(PatientSessionToken.prefix) {
            return try authenticatePatient(token, context: context)
        }
        do {
            let identity = try verifier.verify(token, now: context.now)
            return .caregiver(id: identity.userID)
        } catch {
            context.logger.info("request rejected", metadata: ["auth.reason": .string(error.reason.rawValue)])
            throw Problem.unauthorized()
        }
    }

    private func authenticatePatient(_ text: String, context: InvocationContext) throws -> Principal {
        guard let token = PatientSessionToken(text) else {
            context.logger.info("request rejected", metadata: ["auth.reason": "malformedPatientToken"])
            throw Problem.unauthorized()
        }
        let hash = PostgresBytes(token.hash)
        // A transaction of its own, though it is one read: only a transaction carries the session's bounds (`SET
        // LOCAL` lock and statement timeouts; a statement outside one gets the server's defaults, usually none).
        // Unbounded, a lookup stuck behind a lock (a migration's ALTER TABLE) would wait as long as the host lets
        // it, and behind a transaction-pooling proxy hold one of the pool's few server connections all that time.
        // Two more round trips (BEGIN with the settings, COMMIT) are the price; SET without LOCAL is not an option:
        // it would stay on the pooled server session for whoever gets it next.
        let rows = try context.database.withTransaction(logger: context.logger) { connection in
            try connection.query(
                """
                SELECT id, patient_id FROM patient_sessions
                WHERE token_hash = \(hash) AND revoked_at IS NULL AND expires_at > \(context.now)
                """)
        }
        guard let row = rows.single else {
            context.logger.info("request rejected", metadata: ["auth.reason": "unknownPatientSession"])
            throw Problem.unauthorized()
        }
        let (sessionID, patientID) = try row.decode((UUID, UUID).self)
        return .patient(id: patientID, sessionID: sessionID)
    }

    /// The credentials of `Bearer <token>` (scheme case-insensitive, RFC 9110 §11.1), or `nil`.
    static func bearerToken(_ header: String?) -> String? {
        guard let header else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : token
    }
}

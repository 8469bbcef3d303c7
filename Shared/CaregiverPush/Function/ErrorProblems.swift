import FunctionRuntime
import Libpq
import Logging

// Errors become problem responses here and nowhere else: `Problem(error, logger:)` has one caller, the endpoints'
// `FunctionHandler.handle`. Lower layers (Libpq, Curl, the crypto) know nothing of problems; the conformances
// below say what each of their errors means to a caller of this service.

extension Problem {
    /// The one place where a thrown error becomes a problem; causes are logged, never returned.
    public init(_ error: any Error, logger: Logger) {
        self = Self.mapping(error, logger: logger)
    }

    private static func mapping(_ error: any Error, logger: Logger) -> Problem {
        switch error {
        case let configurationError as ConfigurationError:
            logger.error(
                "function is misconfigured",
                metadata: [
                    "config.variable": .string(configurationError.variable),
                    "config.reason": .string(configurationError.reason),
                ])
            return configurationError.problem
        case let postgresError as PostgresError where postgresError.code == .invalidConnectionString:
            // An unparseable URL is a misconfiguration (500), not an outage (503 with Retry-After).
            logger.error(
                "function is misconfigured",
                metadata: [
                    "config.variable": "DATABASE_URL", "config.reason": "cannot be parsed as a connection string",
                ])
            return .internalError()
        case let postgresError as PostgresError where postgresError.code == .startupParameterRefused:
            logger.error(
                "function is misconfigured",
                metadata: [
                    "config.variable": "DATABASE_URL",
                    "config.reason": "sets a startup parameter the server or its pooler refuses (options=…?)",
                ])
            return .internalError()
        case let postgresError as PostgresError where postgresError.code == .serverNotVerified:
            logger.error(
                "function is misconfigured",
                metadata: [
                    "config.variable": "DATABASE_URL",
                    "config.reason": """
                    the database server's certificate was not verified: sslrootcert (PGSSLROOTCERT) must be the \
                    provider's CA bundle, and the host the name its certificate carries (sslmode=verify-full)
                    """,
                ])
            return Problem(
                type: "/problems/internal", title: "Internal Server Error", status: 500,
                detail: "The database server's certificate could not be verified (DATABASE_URL sslmode, sslrootcert).")
        case let postgresError as PostgresError where postgresError.sqlState == .invalidTextRepresentation:
            // Every value but an id is validated before it is sent; an id is sent as text and read as the app's
            // column type (AppID). Text a `uuid` column cannot hold names no row, as any unknown id does.
            logger.info("request refused", metadata: ["db.code": "22P02"])
            return .notFound("No such patient or medication.")
        case let postgresError as PostgresError where postgresError.code == .invalidParameter:
            logger.warning("request refused", metadata: ["db.code": .string(postgresError.code.description)])
            return .badRequest("The request holds a NUL character, which cannot be stored.")
        case let postgresError as PostgresError:
            logger.error(
                postgresError.isUnavailable ? "database unavailable" : "database error",
                metadata: ErrorMetadata.database(postgresError))
            return postgresError.problem
        case let convertible as any ProblemConvertible:
            return convertible.problem
        default:
            logger.error("unexpected error", metadata: ErrorMetadata.of(error))
            return .internalError()
        }
    }
}

extension PostgresError: ProblemConvertible {
    /// An unreachable database is a 503 the client may retry; every other database failure is a plain 500.
    public var problem: Problem {
        isUnavailable ? .serviceUnavailable() : .internalError()
    }
}

extension UnknownMedication: ProblemConvertible {
    var problem: Problem { .notFound("No such medication.") }
}

extension ConfigurationError: ProblemConvertible {
    /// A configuration error is the operator's problem, not the caller's: a bare 500.
    public var problem: Problem { .internalError() }
}

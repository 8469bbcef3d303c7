import FoundationEssentials
import FunctionRuntime
import Logging

/// One function process of this service, built in one place: its configuration (with the secrets read at run time
/// on Lambda), then its database session, its FCM resources and its token verifier, then the handler, then the host
/// (``FunctionHost``) that runs it. Each `Functions/*/main.swift` names its endpoint and calls ``run(_:)-(Endpoint)``.
///
/// What the process keeps between invocations lives here, and is made again when the secrets change: with
/// `*_SECRET_ARN` variables set, the secrets are read from the Parameters and Secrets extension before the first
/// event; again after an invocation (its response sent, its post-response work done) once `SECRETS_REFRESH_SECONDS`
/// have passed, when at least ``refreshReserve`` of the invocation's time is left; and before an invocation whose
/// secrets are past their grace (read again now, or dropped: the request gets the 500 that names it, never the stale
/// value). Not `Sendable`: one process's thread owns it.
public final class CaregiverService {
    public let logger: Logger
    public private(set) var configuration: Configuration
    /// The database connection: opened on first use, kept by a warm process.
    public private(set) var database: DatabaseSession
    /// The FCM credentials and access token, made on first use (after a recording's response).
    public private(set) lazy var push = PushResources(configuration: configuration)
    /// The caregiver-token keys, made on first use: `SUPABASE_JWKS` parsed once, the `SUPABASE_JWKS_URL` copy kept.
    public private(set) lazy var authenticator = Authenticator(configuration: configuration)
    /// What makes the configuration unusable for a function (no database URL, no way to verify tokens, …), found
    /// once per configuration and answered to every request as the 500 that names it.
    public private(set) var misconfiguration: ConfigurationError?
    private let secrets: RuntimeSecrets?

    /// Runs `endpoint` for this process and exits.
    public static func run(_ endpoint: some Endpoint) -> Never {
        let environment = ProcessInfo.processInfo.environment
        let service = CaregiverService(function: type(of: endpoint).function, environment: environment)
        FunctionHost.run(EndpointHandler(endpoint, service: service), environment: environment)
    }

    /// Runs the scheduled `job` (`push-sweep`) for this process and exits.
    public static func run(_ job: some ScheduledJob) -> Never {
        let environment = ProcessInfo.processInfo.environment
        let service = CaregiverService(function: type(of: job).function, environment: environment)
        FunctionHost.run(ScheduledHandler(job, service: service), environment: environment)
    }

    /// The process's service: its logger (JSON lines on stderr, named for `function`), its configuration read from
    /// `environment` (and the secrets it names), and the resources made from it.
    public init(function: FunctionName, environment: [String: String]) {
        logger = FunctionHost.logger(function: function.rawValue, environment: environment)
        if Configuration.namesSecrets(environment) {
            let secrets = RuntimeSecrets(environment: environment, source: SecretsExtension(environment: environment))
            self.secrets = secrets
            configuration = secrets.configuration(logger: logger)
        } else {
            secrets = nil
            configuration = Configuration(environment: environment)
        }
        database = DatabaseSession(configuration: configuration)
        misconfiguration = Self.misconfiguration(of: configuration)
        reportRefusedValues()
    }

    /// For in-process hosts and tests: a service over `configuration`, logging to `logger`, reading no secret; on
    /// `database` when given (a session the caller keeps across several services).
    public init(configuration: Configuration, logger: Logger, database: DatabaseSession? = nil) {
        self.logger = logger
        self.configuration = configuration
        secrets = nil
        self.database = database ?? DatabaseSession(configuration: configuration)
        misconfiguration = Self.misconfiguration(of: configuration)
    }

    /// The time an invocation must have left for a refresh after it: three secrets at 1 s each, and a margin.
    static let refreshReserve: Duration = .seconds(4)

    /// Before an invocation: a clock read. A secret whose last good reading is older than the grace (refreshes
    /// skipped, or an environment thawed after hours) is read again now, in front of this one request.
    func renewIfPastGrace() {
        guard let secrets, secrets.isPastGrace() else { return }
        renew(secrets.renewedConfiguration(logger: logger, force: true))
    }

    /// After an invocation, with its deadline: the secrets read again once the refresh interval has passed — not
    /// with less than the reading's worst case left (the next invocation's end will do; the grace is checked before
    /// every invocation regardless).
    func renewIfDue(deadline: ContinuousClock.Instant?) {
        guard let secrets, secrets.isDue(), deadline.map({ $0 - .now >= Self.refreshReserve }) ?? true else { return }
        renew(secrets.renewedConfiguration(logger: logger))
    }

    private func renew(_ renewed: Configuration?) {
        guard let renewed else { return }
        logger.info("secrets changed: configuration renewed")
        database.close()
        configuration = renewed
        database = DatabaseSession(configuration: renewed)
        push = PushResources(configuration: renewed)
        authenticator = Authenticator(configuration: renewed)
        misconfiguration = Self.misconfiguration(of: renewed)
        reportRefusedValues()
    }

    private static func misconfiguration(of configuration: Configuration) -> ConfigurationError? {
        do {
            try configuration.requireFunctionBasics()
            return nil
        } catch {
            return error
        }
    }

    /// One-shot mode's end: the database connection is closed.
    public func close() {
        database.close()
    }

    /// Logs, once per configuration, each value it refused (out of range, malformed), so that a mistyped setting does
    /// not pass silently as its default (docs/behaviour.md#configuration). The variable and the rule are logged,
    /// never the value. Secrets that could not be read are logged where they are read (`RuntimeSecrets`).
    private func reportRefusedValues() {
        for error in configuration.errors where !error.variable.hasSuffix("_SECRET_ARN") {
            logger.warning(
                "configuration value refused",
                metadata: ["config.variable": .string(error.variable), "config.reason": .string(error.reason)])
        }
    }
}

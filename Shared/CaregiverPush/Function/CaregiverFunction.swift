import FoundationEssentials
import FunctionRuntime
import Logging

/// What a function process keeps between invocations: its database session and its FCM resources. The runtime's
/// host makes it once per process and hands it to every invocation without looking inside.
public struct FunctionResources {
    public let database: DatabaseSession
    public let push: PushResources

    public init(database: DatabaseSession, push: PushResources) {
        self.database = database
        self.push = push
    }

    /// The resources a process with this configuration uses: nothing connects or loads until first use.
    public init(configuration: Configuration) {
        self.init(
            database: DatabaseSession(configuration: configuration), push: PushResources(configuration: configuration))
    }

    /// One-shot mode's end: the database connection is closed.
    public func release() {
        database.close()
    }
}

/// The entry point of each `Functions/*/main.swift`: the runtime's ``FunctionHost`` with this service's
/// configuration, handler and resources.
public enum CaregiverFunction {
    /// Runs `endpoint` for this process and exits.
    public static func main(_ endpoint: some Endpoint) -> Never {
        main(name: endpoint.functionName) { configuration, logger in
            FunctionHandler(endpoint: endpoint, configuration: configuration, logger: logger)
        }
    }

    /// Runs a scheduled `job` (`push-sweep`) for this process and exits.
    public static func main(_ job: some ScheduledJob) -> Never {
        main(name: job.functionName) { configuration, logger in
            ScheduledHandler(job: job, configuration: configuration, logger: logger)
        }
    }

    /// Runs any other handler over this service's resources (`db-migrate`'s custom resource) and exits.
    ///
    /// With `*_SECRET_ARN` variables set (on Lambda), the secrets are read from the Parameters and Secrets extension
    /// before the first event, and again after an invocation (its response sent, its post-response work done) once
    /// `SECRETS_REFRESH_SECONDS` have passed — at most 1 s per secret, and only when ``refreshReserve`` of the
    /// invocation's time is left: a rotated secret gets a new configuration, handler and resources without a
    /// redeploy, and no request waits for the reading.
    public static func main<H: InvocationHandling>(
        name: String, _ makeHandler: @escaping (Configuration, Logger) -> H
    ) -> Never where H.Resources == FunctionResources {
        let environment = ProcessInfo.processInfo.environment
        guard Configuration.namesSecrets(environment) else {
            FunctionHost.main(name: name, environment: environment) { environment, logger in
                let configuration = Configuration(environment: environment)
                reportRefusedValues(configuration, logger: logger)
                return (makeHandler(configuration, logger), FunctionResources(configuration: configuration))
            }
        }
        let secrets = RuntimeSecrets(environment: environment, source: SecretsExtension(environment: environment))
        let renewed = { (force: Bool) -> (H, FunctionResources)? in
            // Made here, not above: FunctionHost bootstraps the JSON log handler before the loop starts.
            var logger = Logger(label: name)
            logger[metadataKey: "function"] = .string(name)
            guard let configuration = secrets.renewedConfiguration(logger: logger, force: force) else { return nil }
            logger.info("secrets changed: configuration renewed")
            reportRefusedValues(configuration, logger: logger)
            return (makeHandler(configuration, logger), FunctionResources(configuration: configuration))
        }
        let renew = { (deadline: ContinuousClock.Instant?) -> (H, FunctionResources)? in
            // Not with less than the reading's worst case left: the next invocation's end will do, and the grace is
            // checked before every invocation regardless.
            guard secrets.isDue(), deadline.map({ $0 - .now >= refreshReserve }) ?? true else { return nil }
            return renewed(false)
        }
        // Before each invocation, a clock read: a secret whose last good reading is older than the grace (refreshes
        // skipped, or an environment thawed after hours) is read again now, in front of this one request, and dropped
        // if it cannot be — the request then gets the 500 that names it, never the stale value.
        let prepare = { () -> (H, FunctionResources)? in
            guard secrets.isPastGrace() else { return nil }
            return renewed(true)
        }
        FunctionHost.main(name: name, environment: environment, renew: renew, prepare: prepare) { _, logger in
            let configuration = secrets.configuration(logger: logger)
            reportRefusedValues(configuration, logger: logger)
            return (makeHandler(configuration, logger), FunctionResources(configuration: configuration))
        }
    }

    /// The time an invocation must have left for a refresh after it: three secrets at 1 s each, and a margin.
    static let refreshReserve: Duration = .seconds(4)

    /// Logs, once per configuration, each value it refused (out of range, malformed), so that a mistyped setting does
    /// not pass silently as its default (docs/behaviour.md#configuration). The variable and the rule are logged,
    /// never the value. Secrets that could not be read are logged where they are read (`RuntimeSecrets`).
    static func reportRefusedValues(_ configuration: Configuration, logger: Logger) {
        for error in configuration.errors where !error.variable.hasSuffix("_SECRET_ARN") {
            logger.warning(
                "configuration value refused",
                metadata: ["config.variable": .string(error.variable), "config.reason": .string(error.reason)])
        }
    }
}

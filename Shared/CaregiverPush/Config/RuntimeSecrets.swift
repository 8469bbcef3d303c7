import Codecs
import FoundationEssentials
import FunctionRuntime
import Logging

/// The secrets of one function process: read through the Parameters and Secrets extension when the process starts,
/// and read again once `SECRETS_REFRESH_SECONDS` (300 by default, the extension's own cache time) have passed since
/// the last reading — after an invocation's response and its post-response work, never in front of a request
/// (docs/deploy.md, "Secrets at run time").
///
/// A reading that fails for a secret keeps that secret's last good value for a grace of twice the refresh interval
/// (10 minutes by default) after it was last read: an extension that hiccups does not turn a working process into
/// a failing one. Past the grace the process fails closed: the secret is dropped and every invocation answers the
/// 500 that names its ARN variable, so a secret that was deleted or whose access was revoked stops being used.
/// Not `Sendable`: one process's loop owns it.
public final class RuntimeSecrets {
    private let environment: [String: String]
    private let read: (String) -> Result<String, SecretsExtensionError>
    private let refreshRead: (String) -> Result<String, SecretsExtensionError>
    private let refreshInterval: Duration
    /// How long a secret that cannot be read again keeps its last good value.
    let grace: Duration
    private var readAt: ContinuousClock.Instant?
    private var current: (environment: [String: String], errors: [ConfigurationError])?
    /// When each ARN variable's secret was last read successfully.
    private var lastGood: [String: ContinuousClock.Instant] = [:]

    /// - Parameters:
    ///   - environment: the process's environment, with the `*_SECRET_ARN` variables.
    ///   - source: where the secrets are read. The first reading waits for the extension to start; a refresh asks
    ///     once per secret, at most 1 s each (``SecretsExtension/forRefresh``).
    public convenience init(environment: [String: String], source: SecretsExtension) {
        self.init(environment: environment, read: source.secretString, refreshRead: source.forRefresh.secretString)
    }

    init(
        environment: [String: String], read: @escaping (String) -> Result<String, SecretsExtensionError>,
        refreshRead: ((String) -> Result<String, SecretsExtensionError>)? = nil
    ) {
        self.environment = environment
        self.read = read
        self.refreshRead = refreshRead ?? read
        let seconds = environment["SECRETS_REFRESH_SECONDS"].flatMap { Int($0, in: 1...86_400) }
        refreshInterval = .seconds(seconds ?? 300)
        grace = .seconds(2 * (seconds ?? 300))
    }

    /// The configuration with the secrets read now (the first reading).
    public func configuration(logger: Logger, now: ContinuousClock.Instant = .now) -> Configuration {
        let reading = Configuration.resolvingSecrets(in: environment, read: read)
        readAt = now
        current = reading
        let failed = Set(reading.errors.map(\.variable))
        for (arn, _) in Configuration.secretVariables where environment[arn] != nil && !failed.contains(arn) {
            lastGood[arn] = now
        }
        for error in reading.errors {
            logger.error(
                "secret not read",
                metadata: ["config.variable": .string(error.variable), "config.reason": .string(error.reason)])
        }
        return Self.configuration(reading)
    }

    /// Whether the refresh interval has passed since the last reading.
    public func isDue(now: ContinuousClock.Instant = .now) -> Bool {
        guard let readAt else { return false }
        return now - readAt >= refreshInterval
    }

    /// Whether a secret in use was last read successfully longer ago than ``grace``: a clock read, made before every
    /// invocation, so that a value past its grace never serves a request — not after refreshes skipped for short
    /// deadlines, and not in an environment thawed after hours.
    public func isPastGrace(now: ContinuousClock.Instant = .now) -> Bool {
        guard let current else { return false }
        let failing = Set(current.errors.map(\.variable))
        return Configuration.secretVariables.contains { arn, _ in
            environment[arn] != nil && !failing.contains(arn) && lastGood[arn].map { now - $0 >= grace } ?? false
        }
    }

    /// A new configuration when the refresh interval has passed (or `force`) and the new reading differs from the
    /// last: a secret changed, a secret that failed is read again, or one has not been read for longer than
    /// ``grace``.
    public func renewedConfiguration(
        logger: Logger, now: ContinuousClock.Instant = .now, force: Bool = false
    ) -> Configuration? {
        guard force || isDue(now: now), let current else { return nil }
        var reading = Configuration.resolvingSecrets(in: environment, read: refreshRead)
        readAt = now
        var kept: [ConfigurationError] = []
        for error in reading.errors {
            guard let supplied = Configuration.secretVariables.first(where: { $0.arn == error.variable })?.supplies
            else { continue }
            if let goodAt = lastGood[error.variable], now - goodAt < grace,
                let value = current.environment[supplied]
            {
                // Within the grace: the last good value stays in use.
                reading.environment[supplied] = value
                logger.warning(
                    "secret not read again: keeping the last reading",
                    metadata: ["config.variable": .string(error.variable), "config.reason": .string(error.reason)])
            } else {
                kept.append(error)
                logger.error(
                    "secret not read within its grace: no longer used",
                    metadata: ["config.variable": .string(error.variable), "config.reason": .string(error.reason)])
            }
        }
        let failed = Set(reading.errors.map(\.variable))
        for (arn, _) in Configuration.secretVariables where environment[arn] != nil && !failed.contains(arn) {
            lastGood[arn] = now
        }
        reading.errors = kept
        guard current.environment != reading.environment || current.errors.map(\.variable) != kept.map(\.variable)
        else { return nil }
        self.current = reading
        return Self.configuration(reading)
    }

    private static func configuration(_ reading: (environment: [String: String], errors: [ConfigurationError]))
        -> Configuration
    {
        var configuration = Configuration(environment: reading.environment)
        configuration.errors += reading.errors
        return configuration
    }
}

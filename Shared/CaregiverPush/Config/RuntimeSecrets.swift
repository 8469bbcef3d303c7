import FoundationEssentials
import FunctionRuntime
import Logging

/// The secrets of one function process: read through the Parameters and Secrets extension when the process starts,
/// and read again before an invocation once `SECRETS_REFRESH_SECONDS` (300 by default, the extension's own cache
/// time) have passed since the last reading.
///
/// A later reading replaces the configuration only when every secret was read and something changed: an extension
/// that hiccups does not turn a working process into a failing one. Not `Sendable`: one process's loop owns it.
public final class RuntimeSecrets {
    private let environment: [String: String]
    private let read: (String) -> Result<String, SecretsExtensionError>
    private let refreshInterval: Duration
    private var readAt: ContinuousClock.Instant?
    private var current: (environment: [String: String], errors: [ConfigurationError])?

    /// - Parameters:
    ///   - environment: the process's environment, with the `*_SECRET_ARN` variables.
    ///   - source: where the secrets are read.
    public convenience init(environment: [String: String], source: SecretsExtension) {
        self.init(environment: environment, read: source.secretString)
    }

    init(environment: [String: String], read: @escaping (String) -> Result<String, SecretsExtensionError>) {
        self.environment = environment
        self.read = read
        let seconds = environment["SECRETS_REFRESH_SECONDS"].flatMap { Int($0) }.flatMap {
            (1...86_400).contains($0) ? $0 : nil
        }
        refreshInterval = .seconds(seconds ?? 300)
    }

    /// The configuration with the secrets read now (the first reading).
    public func configuration(logger: Logger) -> Configuration {
        let reading = Configuration.resolvingSecrets(in: environment, read: read)
        readAt = .now
        current = reading
        for error in reading.errors {
            logger.error(
                "secret not read",
                metadata: ["config.variable": .string(error.variable), "config.reason": .string(error.reason)])
        }
        return Self.configuration(reading)
    }

    /// A new configuration when the refresh interval has passed and a complete new reading differs from the last.
    public func renewedConfiguration(logger: Logger) -> Configuration? {
        guard let readAt, ContinuousClock.now - readAt >= refreshInterval else { return nil }
        let reading = Configuration.resolvingSecrets(in: environment, read: read)
        self.readAt = .now
        guard reading.errors.isEmpty else {
            logger.warning(
                "secrets not read again: keeping the last reading",
                metadata: ["config.variable": .string(reading.errors[0].variable)])
            return nil
        }
        guard let current, current.environment != reading.environment || !current.errors.isEmpty else { return nil }
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

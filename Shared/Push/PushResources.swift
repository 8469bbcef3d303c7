import Logging

/// The push side of a function process: the service account and its access-token provider, loaded on first use
/// and kept for the process's life (so a warm process mints or reads its token once, not per invocation).
public final class PushResources {
    private enum State {
        case unloaded
        case notConfigured
        case misconfigured(ConfigurationError)
        case ready(AccessTokenProvider)
    }

    private let configuration: Configuration
    private var state = State.unloaded

    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// The token provider, or `nil` when pushes cannot be sent: no key (one warning) or a bad key (an error naming
    /// the variable). Either way the request that triggered the push is unaffected.
    public func tokenProvider(logger: Logger) -> AccessTokenProvider? {
        if case .unloaded = state { state = load() }
        switch state {
        case .ready(let provider):
            return provider
        case .notConfigured:
            logger.warning(
                "push skipped: no FCM service account configured",
                metadata: ["config.variable": "FCM_SERVICE_ACCOUNT_JSON"])
            return nil
        case .misconfigured(let error):
            logger.error(
                "push skipped: FCM service account unusable",
                metadata: ["config.variable": .string(error.variable), "config.reason": .string(error.reason)])
            return nil
        case .unloaded:
            return nil
        }
    }

    private func load() -> State {
        do {
            guard let account = try ServiceAccount.load(from: configuration) else { return .notConfigured }
            let variable = configuration.fcmServiceAccountBase64 != nil ? "FCM_SERVICE_ACCOUNT_JSON" : "FCM_SERVICE_ACCOUNT_FILE"
            return .ready(try AccessTokenProvider(account: account, variable: variable))
        } catch {
            return .misconfigured(error)
        }
    }
}

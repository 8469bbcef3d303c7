import Curl
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
    private var client: CurlClient?

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
            Self.logNoServiceAccount(logger)
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

    /// The one warning of a process that has no FCM service account (`FCM_SERVICE_ACCOUNT_JSON` or `_FILE`): its
    /// pushes are skipped, and the request that owed them is unaffected.
    static func logNoServiceAccount(_ logger: Logger) {
        logger.warning(
            "push skipped: no FCM service account configured",
            metadata: ["config.variable": "FCM_SERVICE_ACCOUNT_JSON"])
    }

    /// The process's FCM client: kept, so that a warm process (and a sweep's batches) reuse its connections.
    /// - Throws: ``CurlError`` when libcurl cannot create one.
    public func httpClient() throws(CurlError) -> CurlClient {
        if let client { return client }
        let created = try CurlClient()
        client = created
        return created
    }

    private func load() -> State {
        do {
            guard let account = try ServiceAccount.load(from: configuration) else { return .notConfigured }
            let variable =
                configuration.fcmServiceAccountBase64 != nil ? "FCM_SERVICE_ACCOUNT_JSON" : "FCM_SERVICE_ACCOUNT_FILE"
            return .ready(
                try AccessTokenProvider(account: account, variable: variable, trust: configuration.trustStore))
        } catch {
            return .misconfigured(error)
        }
    }
}

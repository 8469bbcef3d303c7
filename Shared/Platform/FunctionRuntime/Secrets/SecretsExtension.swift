import Codecs
import Curl
import FoundationEssentials

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The AWS Parameters and Secrets Lambda Extension, as a function on Lambda reaches it: an HTTP GET on loopback.
///
/// `GET http://localhost:$PARAMETERS_SECRETS_EXTENSION_HTTP_PORT/secretsmanager/get?secretId=<ARN>` with the header
/// `X-Aws-Parameters-Secrets-Token: $AWS_SESSION_TOKEN`; the body is Secrets Manager's `GetSecretValue` document, of
/// which only `SecretString` is used. The extension caches each value (300 s by default), so asking again is cheap
/// and sees a rotated value once the cache entry expires. No SDK and no AWS credentials in this process: the
/// extension holds them.
public struct SecretsExtension: Sendable {
    /// `PARAMETERS_SECRETS_EXTENSION_HTTP_PORT`, 2773 by default (the extension's own default).
    public let port: Int
    /// `AWS_SESSION_TOKEN`: the extension refuses a request without it.
    let sessionToken: String?
    /// How long one ``secretString(_:)`` may keep asking while the extension is still starting.
    let readinessWaitMilliseconds: Int
    /// How long one request may take.
    let requestTimeoutMilliseconds: Int

    /// - Parameter environment: the process's environment (the port and the session token).
    public init(
        environment: [String: String], readinessWaitMilliseconds: Int = 3000, requestTimeoutMilliseconds: Int = 2000
    ) {
        port = environment["PARAMETERS_SECRETS_EXTENSION_HTTP_PORT"].flatMap { Int($0, in: 1...65535) } ?? 2773
        sessionToken = environment["AWS_SESSION_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
        self.readinessWaitMilliseconds = readinessWaitMilliseconds
        self.requestTimeoutMilliseconds = requestTimeoutMilliseconds
    }

    /// The same extension for a warm process's refresh: one request per secret, 1 s at most, no waiting for a
    /// start that has long happened — at most 3 s for the three secrets.
    public var forRefresh: SecretsExtension {
        SecretsExtension(port: port, sessionToken: sessionToken, readiness: 0, timeout: 1000)
    }

    private init(port: Int, sessionToken: String?, readiness: Int, timeout: Int) {
        self.port = port
        self.sessionToken = sessionToken
        readinessWaitMilliseconds = readiness
        requestTimeoutMilliseconds = timeout
    }

    /// The `SecretString` of the secret `id` (a name or an ARN), in its current version (`AWSCURRENT`).
    ///
    /// While the extension is still starting (it answers `400` "not ready to serve traffic", or is not listening
    /// yet) this asks again every 100 ms for up to `readinessWaitMilliseconds`; every other answer is final.
    public func secretString(_ id: String) -> Result<String, SecretsExtensionError> {
        guard let sessionToken else { return .failure(SecretsExtensionError(.noSessionToken)) }
        let request = CurlRequest(
            url: "http://127.0.0.1:\(port)/secretsmanager/get?secretId=\(id.percentEncoded)",
            headers: [("X-Aws-Parameters-Secrets-Token", sessionToken)], responseBodyLimit: 256 * 1024)
        let giveUp = ContinuousClock.now + .milliseconds(readinessWaitMilliseconds)
        while true {
            let outcome = Self.interpret(CurlClient.perform(request, timeoutMilliseconds: requestTimeoutMilliseconds))
            guard case .failure(let error) = outcome, error.isStartingUp, ContinuousClock.now < giveUp else {
                return outcome
            }
            ThreadSleep.sleep(for: .milliseconds(100))
        }
    }

    /// What one answer of the extension means.
    static func interpret(_ result: Result<CurlResponse, CurlError>) -> Result<String, SecretsExtensionError> {
        let response: CurlResponse
        switch result {
        case .failure(let error) where error.kind == .connectionFailed:
            return .failure(SecretsExtensionError(.notListening))
        case .failure(let error) where error.kind == .libraryUnavailable:
            return .failure(SecretsExtensionError(.clientUnavailable, detail: error.detail))
        case .failure:
            return .failure(SecretsExtensionError(.unreachable))
        case .success(let answer):
            response = answer
        }
        guard response.status == 200 else {
            let text = String(decoding: response.body.prefix(512), as: UTF8.self)
            if response.status == 400, text.lowercased().contains("not ready") {
                return .failure(SecretsExtensionError(.notReady, status: 400))
            }
            // Secrets Manager's error type when the extension passes one on (`ResourceNotFoundException`,
            // `AccessDeniedException`): names a kind of failure, never the secret.
            let type = (try? JSONValue.parse(response.body))?["__type"]?.stringValue.flatMap {
                $0.count <= 80 && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || ".#:_".contains($0)) }
                    ? $0 : nil
            }
            return .failure(SecretsExtensionError(.refused, status: response.status, awsErrorType: type))
        }
        guard let document = try? JSONValue.parse(response.body), let value = document["SecretString"]?.stringValue
        else {
            return .failure(SecretsExtensionError(.noSecretString, status: 200))
        }
        return .success(value)
    }

}

/// Why a secret could not be read. Safe to log and to put in a ``ConfigurationError``: it never holds the value.
public struct SecretsExtensionError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// `AWS_SESSION_TOKEN` is not set: not on Lambda, or the extension could not be asked anyway.
        case noSessionToken
        /// Nothing listens on the extension's port (the layer is missing, or it has not started).
        case notListening
        /// The extension answered that it is still starting.
        case notReady
        /// The request failed some other way (a timeout, a broken connection).
        case unreachable
        /// The extension (or Secrets Manager behind it) refused: unknown secret, no permission, bad token.
        case refused
        /// The answer had no `SecretString` (a binary secret).
        case noSecretString
        /// libcurl, the HTTP client, could not be loaded (a zip without its `lib/libcurl.so.4`): nothing was asked.
        case clientUnavailable
    }

    public let kind: Kind
    public let status: Int?
    public let awsErrorType: String?
    /// For ``Kind/clientUnavailable``, the loader's sentence (``CurlError/detail``): it names the library, or the
    /// dependency or symbol it lacks.
    public let detail: String?

    public init(_ kind: Kind, status: Int? = nil, awsErrorType: String? = nil, detail: String? = nil) {
        self.kind = kind
        self.status = status
        self.awsErrorType = awsErrorType
        self.detail = detail
    }

    /// Worth asking again in a moment: the extension starts alongside the function.
    var isStartingUp: Bool { kind == .notReady || kind == .notListening }

    public var description: String {
        switch kind {
        case .noSessionToken: "AWS_SESSION_TOKEN is not set, so the Parameters and Secrets extension cannot be asked"
        case .notListening: "nothing listens on the Parameters and Secrets extension's port (is its layer added?)"
        case .notReady: "the Parameters and Secrets extension was still not ready"
        case .unreachable: "the Parameters and Secrets extension did not answer"
        case .refused:
            "the Parameters and Secrets extension refused (HTTP \(status ?? 0)"
                + (awsErrorType.map { ", \($0)" } ?? "") + ")"
        case .noSecretString: "the secret has no SecretString"
        case .clientUnavailable: "the HTTP client could not be loaded" + (detail.map { ": \($0)" } ?? "")
        }
    }
}

import Codecs
import FoundationEssentials

/// A Google service-account key (the JSON file Firebase hands out), as far as sending pushes needs it.
///
/// Never logged: `description` names only the client email and the key id.
public struct ServiceAccount: Sendable, CustomStringConvertible {
    public let projectID: String
    public let clientEmail: String
    public let privateKeyID: String
    /// PEM, PKCS#8 RSA. Secret.
    public let privateKeyPEM: String
    /// Where the assertion is exchanged for an access token (`https://oauth2.googleapis.com/token`).
    public let tokenURI: String

    public var description: String { "ServiceAccount(\(clientEmail), key \(privateKeyID))" }

    /// Parses the key file's JSON.
    /// - Throws: ``ConfigurationError`` naming `variable` and the first missing or wrong field (never its value).
    public init(json: [UInt8], variable: String) throws(ConfigurationError) {
        guard let document = try? JSONValue.parse(json), document.objectValue != nil else {
            throw ConfigurationError(variable: variable, reason: "is not a service-account key (not a JSON object)")
        }
        func field(_ name: String) throws(ConfigurationError) -> String {
            guard let value = document[name]?.stringValue, !value.isEmpty else {
                throw ConfigurationError(variable: variable, reason: "has no \(name)")
            }
            return value
        }
        guard try field("type") == "service_account" else {
            throw ConfigurationError(variable: variable, reason: "is not of type service_account")
        }
        projectID = try field("project_id")
        clientEmail = try field("client_email")
        privateKeyID = try field("private_key_id")
        // Keys pasted through environments sometimes arrive with literal "\n" escapes.
        privateKeyPEM = try field("private_key").replacing("\\n", with: "\n")
        tokenURI = try field("token_uri")
        guard tokenURI.hasPrefix("https://") || tokenURI.hasPrefix("http://") else {
            throw ConfigurationError(variable: variable, reason: "has a token_uri that is not an http(s) URL")
        }
    }

    /// The service account the configuration names, `nil` when none is configured (pushes are then skipped).
    /// - Throws: ``ConfigurationError`` naming `FCM_SERVICE_ACCOUNT_JSON` or `FCM_SERVICE_ACCOUNT_FILE`.
    public static func load(from configuration: Configuration) throws(ConfigurationError) -> ServiceAccount? {
        if let encoded = configuration.fcmServiceAccountBase64 {
            guard let json = Base64.decode(encoded.filter { !$0.isWhitespace }) else {
                throw ConfigurationError(variable: "FCM_SERVICE_ACCOUNT_JSON", reason: "is not base64")
            }
            return try ServiceAccount(json: json, variable: "FCM_SERVICE_ACCOUNT_JSON")
        }
        if let path = configuration.fcmServiceAccountFile {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ConfigurationError(
                    variable: "FCM_SERVICE_ACCOUNT_FILE", reason: "names a file that cannot be read")
            }
            return try ServiceAccount(json: Array(data), variable: "FCM_SERVICE_ACCOUNT_FILE")
        }
        return nil
    }
}

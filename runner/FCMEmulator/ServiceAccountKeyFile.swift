import Codecs

/// A Google service-account key file, as Firebase hands one out: what the emulator's throwaway accounts are given
/// to the functions as (`FCM_SERVICE_ACCOUNT_JSON`), for the runner, the tests and the benchmarks. The functions only
/// read key files (`ServiceAccount`); nothing that ships writes one.
public enum ServiceAccountKeyFile {
    /// The key file's JSON, pretty-printed as Google's are.
    public static func json(
        projectID: String, clientEmail: String, privateKeyID: String, privateKeyPEM: String, tokenURI: String
    ) -> String {
        let members: [String: JSONValue] = [
            "type": .string("service_account"), "project_id": .string(projectID),
            "private_key_id": .string(privateKeyID), "private_key": .string(privateKeyPEM),
            "client_email": .string(clientEmail), "client_id": .string("000000000000000000000"),
            "token_uri": .string(tokenURI), "auth_uri": .string("https://accounts.google.com/o/oauth2/auth"),
        ]
        let encoder = JSONCoding.encoder(prettyPrinted: true)
        return (try? encoder.encode(JSONValue.object(members))).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}

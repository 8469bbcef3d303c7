import Codecs
import FoundationEssentials
import FunctionRuntime

/// Secrets read at run time on Lambda: each `*_SECRET_ARN` variable names a Secrets Manager secret whose value the
/// function asks the Parameters and Secrets extension for when it starts (and again once the refresh interval has
/// passed), instead of a deploy-time value stored in the function's configuration.
///
/// | Variable                          | Supplies                   | Secret's `SecretString`                           |
/// |-----------------------------------|----------------------------|---------------------------------------------------|
/// | `DATABASE_SECRET_ARN`             | `DATABASE_URL`             | a URL, or JSON: `username`, `password`, `host`    |
/// | `SUPABASE_JWT_SECRET_ARN`         | `SUPABASE_JWT_SECRET`      | the HS256 secret                                  |
/// | `FCM_SERVICE_ACCOUNT_SECRET_ARN`  | `FCM_SERVICE_ACCOUNT_JSON` | the key file's JSON, or its base64                |
/// | `RUNTIME_DATABASE_SECRET_ARN`     | `RUNTIME_DATABASE_URL`     | as `DATABASE_SECRET_ARN` (`db-migrate` only)      |
/// | `EDGE_ORIGIN_SECRET_ARN`          | `EDGE_ORIGIN_SECRET`       | the edge's `x-origin-verify` value                |
///
/// When an ARN variable is set it wins over the plain variable it supplies. Plain variables stay the way for the
/// runner, Knative and the tests.
extension Configuration {
    /// The ARN variables and the variable each one supplies.
    public static let secretVariables: [(arn: String, supplies: String)] = [
        ("DATABASE_SECRET_ARN", "DATABASE_URL"),
        ("SUPABASE_JWT_SECRET_ARN", "SUPABASE_JWT_SECRET"),
        ("FCM_SERVICE_ACCOUNT_SECRET_ARN", "FCM_SERVICE_ACCOUNT_JSON"),
        // db-migrate only: the runtime role's secret, whose password becomes the role's login (RuntimeLogin).
        ("RUNTIME_DATABASE_SECRET_ARN", "RUNTIME_DATABASE_URL"),
        // The HTTP functions behind the edge: what CloudFront adds to each request it forwards.
        ("EDGE_ORIGIN_SECRET_ARN", "EDGE_ORIGIN_SECRET"),
    ]

    /// Whether `environment` names any secret to read at run time.
    public static func namesSecrets(_ environment: [String: String]) -> Bool {
        secretVariables.contains { !(environment[$0.arn] ?? "").trimmingWhitespaceAndNewlines().isEmpty }
    }

    /// `environment` with each secret an ARN variable names read through `read` and put in the variable it
    /// supplies, and one ``ConfigurationError`` (naming the ARN variable, never a value) per secret that could not
    /// be read or understood; the variable it would have supplied is then removed rather than left at a stale or
    /// plain value.
    public static func resolvingSecrets(
        in environment: [String: String], read: (String) -> Result<String, SecretsExtensionError>
    ) -> (environment: [String: String], errors: [ConfigurationError]) {
        var resolved = environment
        var errors: [ConfigurationError] = []
        for (arnVariable, supplied) in secretVariables {
            guard let arn = environment[arnVariable]?.trimmingWhitespaceAndNewlines(), !arn.isEmpty else { continue }
            resolved[supplied] = nil
            let value: String
            switch read(arn) {
            case .failure(let error):
                errors.append(ConfigurationError(variable: arnVariable, reason: "cannot be read: \(error)"))
                continue
            case .success(let text):
                value = text.trimmingWhitespaceAndNewlines()
            }
            switch supplied {
            case "DATABASE_URL", "RUNTIME_DATABASE_URL":
                guard let url = databaseURL(fromSecret: value) else {
                    errors.append(
                        ConfigurationError(
                            variable: arnVariable,
                            reason: "is neither a postgres:// URL nor a JSON object with username, password and host"))
                    continue
                }
                resolved[supplied] = url
            case "FCM_SERVICE_ACCOUNT_JSON":
                // Secrets Manager holds the key file as it is; the variable it supplies is its base64.
                resolved[supplied] = value.hasPrefix("{") ? Base64.encode(Array(value.utf8)) : value
            default:
                resolved[supplied] = value
            }
        }
        return (resolved, errors)
    }

    /// The libpq URL in a database secret: a URL as it is, or a JSON object with `username`, `password` and `host`
    /// (`port`, `dbname` optional: the shape Secrets Manager's RDS rotation functions keep), with user and password
    /// percent-encoded. The secret RDS manages for a master password has no `host`, so it is refused
    /// (docs/deploy.md#secret-database). TLS settings (`sslmode`, `sslrootcert`) then come from libpq's own
    /// `PGSSLMODE` / `PGSSLROOTCERT` variables, which are not secret.
    static func databaseURL(fromSecret value: String) -> String? {
        if value.hasPrefix("postgres://") || value.hasPrefix("postgresql://") { return value }
        guard value.hasPrefix("{"), let document = try? JSONValue.parse(value),
            let username = document["username"]?.stringValue, !username.isEmpty,
            let password = document["password"]?.stringValue,
            let host = document["host"]?.stringValue, !host.isEmpty,
            host.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "_" })
        else { return nil }
        let port: Int
        switch document["port"] {
        case .none: port = 5432
        case .some(let member):
            // Exactly an integer from 1 to 65535: `Int(_: Double)` would trap on 2^63 and beyond and cut 5432.9
            // to 5432 without a word.
            guard let number = member.numberValue.map({ Int(exactly: $0) }) ?? member.stringValue.map({ Int($0) }),
                let number, (1...65535).contains(number)
            else { return nil }
            port = number
        }
        let database = document["dbname"]?.stringValue ?? document["database"]?.stringValue ?? "postgres"
        return "postgresql://\(username.percentEncoded):\(password.percentEncoded)"
            + "@\(host):\(port)/\(database.percentEncoded)"
    }
}

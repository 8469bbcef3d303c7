import Codecs
import Curl
import FoundationEssentials
import FunctionRuntime
import Libpq

/// Everything a function reads from its environment, read once at start (docs/behaviour.md#configuration).
///
/// Reading never fails: a missing or malformed variable is kept as a ``ConfigurationError`` and reported when
/// something needs it, so that a misconfigured function still answers each invocation with a 500 problem and a
/// log line naming the variable, instead of dying without a response.
public struct Configuration: Sendable {
    public enum PushEnvironment: String, Sendable, CaseIterable {
        case development = "DEV"
        case production = "PROD"
    }

    public var databaseURL: String?
    /// `RUNTIME_DATABASE_URL` (on Lambda from `RUNTIME_DATABASE_SECRET_ARN`): `db-migrate` only — the runtime role's
    /// connection, whose password the migrator gives `caregiver_push_runtime` as its login (docs/deploy.md#roles).
    public var runtimeDatabaseURL: String?
    /// `SUPABASE_JWT_SECRET`: HS256 secret, used as its UTF-8 bytes (as Supabase does).
    public var jwtSecret: String?
    /// `EDGE_ORIGIN_SECRET` (or `EDGE_ORIGIN_SECRET_ARN`): the value the edge in front (CloudFront) adds to every
    /// request it forwards as `x-origin-verify`. Set, a request without it did not come through the edge (someone
    /// calling the HTTP API's own URL, around the edge's per-client limits) and is refused before anything else.
    public var edgeOriginSecret: String?
    /// `SUPABASE_JWKS_PINS`: RFC 7638 thumbprints (comma-separated) of the only keys trusted from `SUPABASE_JWKS` or
    /// `SUPABASE_JWKS_URL`; `nil`: every key the set publishes. A production pin against a key set served by someone
    /// else than the project (its endpoint, DNS or TLS subverted): a new signing key is then trusted only once its
    /// thumbprint is added here.
    public var jwksPins: Set<String>?
    /// `SUPABASE_JWKS`, with a `@/path` reference already read.
    public var jwksJSON: String?
    /// `SUPABASE_JWKS_URL`: where the project publishes its signing keys; `https://`, or `http://` on a loopback host
    /// (a local emulator).
    public var jwksURL: String?
    public var jwtAudience: String
    public var jwtIssuer: String?
    public var pushEnvironment: PushEnvironment?
    /// `FCM_SERVICE_ACCOUNT_JSON` (base64 of the key file) as given.
    public var fcmServiceAccountBase64: String?
    public var fcmServiceAccountFile: String?
    public var fcmAPIBaseURL: String
    public var pushSendDeadlineMilliseconds: Int
    /// How long a lease of deliveries lasts: the send deadline plus 5 s, so that a live sender always finishes (or
    /// gives up) inside its lease.
    public var pushLeaseSeconds: Double { Double(pushSendDeadlineMilliseconds + 5000) / 1000 }
    /// `DATABASE_LOCK_TIMEOUT_MS` and `DATABASE_STATEMENT_TIMEOUT_MS`: every transaction's bounds.
    public var transactionSettings: TransactionSettings
    /// `DATABASE_PREPARED_STATEMENTS` (`on` / `off`, default `off`): whether the functions' connection prepares its
    /// statements by name, planned once per connection. Only for a direct connection (or a session-mode pooler): a
    /// transaction pooler would leave them on the server sessions it shares.
    public var preparesStatements: Bool
    /// `PUSH_MAX_AGE_SECONDS`: a delivery whose event was committed longer ago is never sent (`EXPIRED`).
    public var pushMaxAgeSeconds: Int
    /// `PUSH_DEVICE_STALE_DAYS`: a registration not renewed for this long is sent nothing, and `push-sweep`
    /// disables it (`STALE`): the bound on how long a phone whose caregiver's session ended keeps receiving
    /// (docs/behaviour.md#registration-bound).
    public var pushDeviceStaleDays: Int
    /// `PUSH_DEVICE_STALE_DAYS`' default: Google calls a token stale after about a month without the app checking in.
    public static let defaultDeviceStaleDays = 30
    /// Enabled devices one caregiver may have (`PUSH_MAX_DEVICES_PER_CAREGIVER`'s default).
    public static let defaultDeviceCap = 10
    /// `PUSH_MAX_DEVICES_PER_CAREGIVER`: enabled devices one caregiver may have; past it the least recently seen
    /// are disabled as `REPLACED`, and one event is sent to at most this many devices per caregiver.
    public var pushMaxDevicesPerCaregiver: Int
    /// `PUSH_RETENTION_DAYS`: `push-sweep` deletes final deliveries and their events older than this.
    public var pushRetentionDays: Int
    /// `PUSH_SWEEP_BATCH_SIZE`: deliveries one lease of `push-sweep` takes.
    public var pushSweepBatchSize: Int
    /// `PUSH_SWEEP_SEND_RATE`: the most `messages:send` one `push-sweep` process starts per second (a burst of a tenth
    /// of a second's worth at most). The default stays below FCM's project quota of 600,000 a minute (10,000 a
    /// second), leaving room for the recordings' own sends.
    public var pushSweepSendRate: Int
    /// `PUSH_SWEEP_TIME_LIMIT_MS`: how long one `push-sweep` run may lease and send, when its host gives no
    /// deadline of its own (one-shot mode); under the Runtime API the invocation's deadline bounds it too.
    public var pushSweepTimeLimitMilliseconds: Int
    /// `PUSH_SWEEP_STAY` (`on` / `off`, default `off`): whether a `push-sweep` run stays until its time limit once
    /// nothing is due, sending each delivery as it falls due (a recording's retry after its back-off), rather than
    /// ending. The deployments' schedules turn it on, so that some run is always there; a run by hand or in CI
    /// (`echo '{}' | push-sweep`) makes one pass.
    public var pushSweepStays: Bool
    /// Who sends a recording's deliveries first (`PUSH_FIRST_SEND`).
    public enum FirstSender: String, Sendable {
        /// The recording's own process, right after its answer (one attempt per device).
        case recording
        /// A staying `push-sweep` run, which leases what recordings queued every ``PushDispatcher/firstSendSpacing``.
        case sweep
    }
    /// `PUSH_FIRST_SEND` (`recording` / `sweep`, default `recording`): who sends a recording's deliveries first.
    /// `recording`: the recording's process, after its answer, one lease and one outcome statement per recording.
    /// `sweep`: the recording only queues them, and the staying sweep (`PUSH_SWEEP_STAY=on`, some run always there)
    /// sends everything queued in one lease every few tens of milliseconds: the recording's worker is free at its
    /// answer, and the database leases and records a batch of recordings per statement.
    public var pushFirstSend: FirstSender
    /// `METRICS_NAMESPACE`: the CloudWatch namespace of the EMF metrics lines.
    public var metricsNamespace: String
    /// `SSL_CERT_FILE` / `SSL_CERT_DIR`, or the system bundle: whom every outgoing TLS connection trusts.
    public var trustStore: TrustStore
    /// Problems found while reading, reported by ``requireFunctionBasics()`` or by the push.
    public var errors: [ConfigurationError]
    /// Set only by `runner check-deployment` for its own in-process invocations, never from the environment: every
    /// message goes to this FCM topic with `validate_only`, so FCM checks it and delivers nothing
    /// (docs/deploy.md#prove-a-deployment).
    package var fcmValidationTopic: String?

    /// Reads the configuration from an environment (normally `ProcessInfo.processInfo.environment`).
    public init(environment: [String: String]) {
        func value(_ name: String) -> String? {
            guard let raw = environment[name]?.trimmingWhitespaceAndNewlines(), !raw.isEmpty else {
                return nil
            }
            return raw
        }
        errors = []
        databaseURL = value("DATABASE_URL")
        runtimeDatabaseURL = value("RUNTIME_DATABASE_URL")
        jwtSecret = value("SUPABASE_JWT_SECRET")
        if let secret = jwtSecret, secret.utf8.count < 32 {
            // A short HMAC secret can be brute-forced from one token; Supabase's are at least 32 characters. Counted in
            // UTF-8 bytes, the key HMAC uses.
            jwtSecret = nil
            errors.append(ConfigurationError(variable: "SUPABASE_JWT_SECRET", reason: "is shorter than 32 bytes"))
        }
        edgeOriginSecret = value("EDGE_ORIGIN_SECRET")
        if let secret = edgeOriginSecret, secret.utf8.count < 32 {
            edgeOriginSecret = nil
            errors.append(ConfigurationError(variable: "EDGE_ORIGIN_SECRET", reason: "is shorter than 32 bytes"))
        }
        jwtAudience = value("SUPABASE_JWT_AUDIENCE") ?? "authenticated"
        jwtIssuer = value("SUPABASE_JWT_ISSUER")
        if let jwks = value("SUPABASE_JWKS") {
            if jwks.hasPrefix("@") {
                let path = String(jwks.dropFirst())
                if let contents = try? String(contentsOfFile: path, encoding: .utf8) {
                    jwksJSON = contents
                } else {
                    jwksJSON = nil
                    errors.append(
                        ConfigurationError(variable: "SUPABASE_JWKS", reason: "the file it names cannot be read"))
                }
            } else {
                jwksJSON = jwks
            }
        } else {
            jwksJSON = nil
        }
        jwksURL = value("SUPABASE_JWKS_URL")
        jwksPins = value("SUPABASE_JWKS_PINS").map { list in
            Set(list.split(separator: ",").map { String($0).trimmingWhitespaceAndNewlines() }.filter { !$0.isEmpty })
        }
        if jwksPins?.isEmpty == true {
            jwksPins = nil
            errors.append(ConfigurationError(variable: "SUPABASE_JWKS_PINS", reason: "names no thumbprint"))
        }
        if let url = jwksURL, !Self.isAcceptableJWKSURL(url) {
            jwksURL = nil
            errors.append(
                ConfigurationError(
                    variable: "SUPABASE_JWKS_URL",
                    reason: "must be an https:// URL (http:// only on 127.0.0.1, localhost or [::1])"))
        }
        if let raw = value("PUSH_ENVIRONMENT") {
            pushEnvironment = PushEnvironment(rawValue: raw)
            if pushEnvironment == nil {
                errors.append(ConfigurationError(variable: "PUSH_ENVIRONMENT", reason: "must be DEV or PROD"))
            }
        } else {
            pushEnvironment = nil
        }
        fcmServiceAccountBase64 = value("FCM_SERVICE_ACCOUNT_JSON")
        fcmServiceAccountFile = value("FCM_SERVICE_ACCOUNT_FILE")
        fcmAPIBaseURL = value("FCM_API_BASE_URL") ?? "https://fcm.googleapis.com"
        trustStore = TrustStore(environment: value, fileExists: { FileManager.default.isReadableFile(atPath: $0) })
        var errors = self.errors
        func integer(_ name: String, default fallback: Int, range: ClosedRange<Int>, unit: String) -> Int {
            guard let raw = value(name) else { return fallback }
            guard let number = Int(raw, in: range) else {
                errors.append(
                    ConfigurationError(
                        variable: name, reason: "must be \(range.lowerBound) to \(range.upperBound) \(unit)"))
                return fallback
            }
            return number
        }
        transactionSettings = TransactionSettings(
            lockTimeoutMilliseconds: integer(
                "DATABASE_LOCK_TIMEOUT_MS", default: 2000, range: 1...60_000, unit: "milliseconds"),
            statementTimeoutMilliseconds: integer(
                "DATABASE_STATEMENT_TIMEOUT_MS", default: 5000, range: 1...60_000, unit: "milliseconds"))
        switch value("PUSH_SWEEP_STAY") {
        case nil, "off": pushSweepStays = false
        case "on": pushSweepStays = true
        default:
            pushSweepStays = false
            errors.append(ConfigurationError(variable: "PUSH_SWEEP_STAY", reason: "must be on or off"))
        }
        let firstSend = value("PUSH_FIRST_SEND")
        pushFirstSend = firstSend.flatMap(FirstSender.init(rawValue:)) ?? .recording
        if let firstSend, FirstSender(rawValue: firstSend) == nil {
            errors.append(ConfigurationError(variable: "PUSH_FIRST_SEND", reason: "must be recording or sweep"))
        }
        switch value("DATABASE_PREPARED_STATEMENTS") {
        case nil, "off": preparesStatements = false
        case "on": preparesStatements = true
        default:
            preparesStatements = false
            errors.append(ConfigurationError(variable: "DATABASE_PREPARED_STATEMENTS", reason: "must be on or off"))
        }
        pushSendDeadlineMilliseconds = integer(
            "PUSH_SEND_DEADLINE_MS", default: 10_000, range: 1...900_000, unit: "milliseconds")
        pushMaxAgeSeconds = integer("PUSH_MAX_AGE_SECONDS", default: 3600, range: 1...604_800, unit: "seconds")
        pushDeviceStaleDays = integer(
            "PUSH_DEVICE_STALE_DAYS", default: Self.defaultDeviceStaleDays, range: 1...3650, unit: "days")
        pushMaxDevicesPerCaregiver = integer(
            "PUSH_MAX_DEVICES_PER_CAREGIVER", default: Self.defaultDeviceCap, range: 1...100,
            unit: "devices")
        pushRetentionDays = integer("PUSH_RETENTION_DAYS", default: 30, range: 1...3650, unit: "days")
        pushSweepBatchSize = integer("PUSH_SWEEP_BATCH_SIZE", default: 1000, range: 1...10_000, unit: "deliveries")
        pushSweepSendRate = integer(
            "PUSH_SWEEP_SEND_RATE", default: Self.defaultSweepSendRate, range: 1...10_000, unit: "sends per second")
        pushSweepTimeLimitMilliseconds = integer(
            "PUSH_SWEEP_TIME_LIMIT_MS", default: 50_000, range: 1000...900_000, unit: "milliseconds")
        self.errors = errors
        metricsNamespace = value("METRICS_NAMESPACE") ?? "CaregiverPush"
    }

    /// `PUSH_SWEEP_SEND_RATE`'s default: 8,000 sends a second, below FCM's 10,000 a second project quota.
    public static let defaultSweepSendRate = 8000

    /// Checks what every invocation needs: a database URL and at least one way to verify caregiver tokens.
    /// - Throws: the first ``ConfigurationError`` that makes the function unusable.
    public func requireFunctionBasics() throws(ConfigurationError) {
        // An edge secret that is set but unusable must not leave the check off.
        if let edgeError = errors.first(where: { $0.variable.hasPrefix("EDGE_ORIGIN_SECRET") }) { throw edgeError }
        // A pin list that is set but empty must not trust every key.
        if let pinError = errors.first(where: { $0.variable == "SUPABASE_JWKS_PINS" }) { throw pinError }
        guard databaseURL != nil else {
            // A database secret that could not be read is the cause to name, not the variable it would have set.
            throw errors.first { $0.variable == "DATABASE_SECRET_ARN" }
                ?? ConfigurationError(variable: "DATABASE_URL", reason: "is not set")
        }
        guard jwtSecret != nil || jwksJSON != nil || jwksURL != nil else {
            if let keyError = errors.first(where: {
                $0.variable.hasPrefix("SUPABASE_JWT") || $0.variable.hasPrefix("SUPABASE_JWKS")
            }) {
                throw keyError
            }
            throw ConfigurationError(
                variable: "SUPABASE_JWT_SECRET",
                reason: "is not set (nor SUPABASE_JWKS, nor SUPABASE_JWKS_URL): caregiver tokens cannot be verified")
        }
    }

    /// Whether `text` may be fetched for signing keys: an absolute `https://` URL with a host; `http://` only for a
    /// loopback host, where nothing crosses a network (local development against an emulator).
    static func isAcceptableJWKSURL(_ text: String) -> Bool {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            let host = components.host?.lowercased(), !host.isEmpty, components.user == nil,
            components.password == nil
        else { return false }
        switch scheme {
        case "https": return true
        case "http": return ["127.0.0.1", "localhost", "[::1]", "::1"].contains(host)
        default: return false
        }
    }
}

/// A missing or malformed environment variable. Safe to log: it names the variable, never its value.
public struct ConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    public let variable: String
    public let reason: String

    public var description: String { "\(variable) \(reason)" }
}

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

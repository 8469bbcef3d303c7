import ArgumentParser
import CaregiverPush
import Codecs
import Foundation
import FunctionRuntime
import Libpq
import Logging
import Synchronization

/// `runner check-deployment`: proves a deployment end to end with its own configuration
/// (docs/deploy.md#prove-a-deployment): the runtime role's login through the pooler, a caregiver token from the
/// project's auth verified as the functions verify it, a throwaway household made with the households login, a
/// throwaway device registered and a dose recorded through the functions' own handlers, the push it owes accepted by
/// FCM in validate-only mode (addressed to a topic no one subscribes to: FCM checks everything and delivers nothing),
/// and everything removed again. The first step that fails is one line on stderr and exit status 1.
struct CheckDeployment: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-deployment",
        abstract: "Prove a deployment: register, record and push (validate-only) for a throwaway household.",
        discussion: """
            Environment: the functions' own (DATABASE_URL as caregiver_push_runtime, through the pooler the functions \
            use; SUPABASE_JWT_SECRET or SUPABASE_JWKS / SUPABASE_JWKS_URL; FCM_SERVICE_ACCOUNT_JSON or \
            FCM_SERVICE_ACCOUNT_FILE; PUSH_ENVIRONMENT), and HOUSEHOLDS_DATABASE_URL, the households login's URL. \
            CHECK_CAREGIVER_TOKEN (or --caregiver-token): an access token your auth issued to a test account.
            """)

    @Option(help: "A test account's access token (default: CHECK_CAREGIVER_TOKEN).")
    var caregiverToken: String?

    func run() throws {
        let environment = ProcessInfo.processInfo.environment
        let check = DeploymentCheck(
            environment: environment, caregiverToken: caregiverToken ?? environment["CHECK_CAREGIVER_TOKEN"] ?? "")
        switch check.run(report: { print($0) }) {
        case .success:
            print("deployment check passed")
        case .failure(let failure):
            FileHandle.standardError.write(Data("deployment check failed at \(failure)\n".utf8))
            throw ExitCode(1)
        }
    }
}

/// The check's steps, in order; each failure names its step and says why in one line, never with a secret, a token or
/// libpq's own connection text (which may repeat part of a URL).
struct DeploymentCheck {
    enum Step: String {
        case configuration
        case runtimeLogin = "runtime login"
        case caregiverToken = "caregiver token"
        case household = "throwaway household"
        case record = "record a dose"
        case fcm = "FCM validate-only"
        case cleanUp = "clean up"
    }

    struct Failure: Error, CustomStringConvertible {
        let step: Step
        let reason: String
        var description: String { "\(step.rawValue): \(reason)" }
    }

    /// The topic the check's message is addressed to: FCM accepts a message to any well-formed topic name.
    static let topic = "caregiver-push-deployment-check"
    static let runtimeRole = "caregiver_push_runtime"
    static let householdName = "deployment check"

    let environment: [String: String]
    let caregiverToken: String

    /// Runs every step, and the clean-up of what was made whatever failed; `report` gets a line per step passed.
    func run(report: (String) -> Void) -> Result<Void, Failure> {
        var configuration = Configuration(environment: environment)
        if let error = configuration.errors.first {
            return .failure(Failure(step: .configuration, reason: error.description))
        }
        guard configuration.databaseURL != nil else {
            return .failure(Failure(step: .configuration, reason: "DATABASE_URL is not set"))
        }
        guard let householdsURL = environment["HOUSEHOLDS_DATABASE_URL"], !householdsURL.isEmpty else {
            return .failure(Failure(step: .configuration, reason: "HOUSEHOLDS_DATABASE_URL is not set"))
        }
        guard !caregiverToken.isEmpty else {
            return .failure(Failure(step: .configuration, reason: "no caregiver token (CHECK_CAREGIVER_TOKEN)"))
        }
        configuration.fcmValidationTopic = Self.topic
        let session = DatabaseSession(configuration: configuration)
        defer { session.close() }
        let resources = CaregiverService(
            configuration: configuration, logger: Logger(label: "check"), database: session)
        let run = Run(
            configuration: configuration, resources: resources, householdsURL: householdsURL,
            caregiverToken: caregiverToken)
        var outcome: Result<Void, Failure>
        do {
            try run.steps(report: report)
            outcome = .success(())
        } catch let failure as Failure {
            outcome = .failure(failure)
        } catch {
            outcome = .failure(Failure(step: run.step, reason: "unexpected \(type(of: error))"))
        }
        // The clean-up runs whatever failed; its own failure is the one reported only when nothing failed before.
        if let cleanUp = run.cleanUp(), case .success = outcome {
            outcome = .failure(cleanUp)
        } else if case .success = outcome {
            report("ok  \(Step.cleanUp.rawValue)")
        }
        return outcome
    }

    /// One run's state: what it made, so that the clean-up removes exactly that.
    final class Run {
        let configuration: Configuration
        let resources: CaregiverService
        let householdsURL: String
        let caregiverToken: String
        let deviceToken = "deployment-check-" + UUID().uuidString.lowercased()
        private(set) var patient: UUID?
        private(set) var registered = false
        /// The step under way, for an error no step expected.
        private(set) var step = Step.runtimeLogin

        init(configuration: Configuration, resources: CaregiverService, householdsURL: String, caregiverToken: String) {
            self.configuration = configuration
            self.resources = resources
            self.householdsURL = householdsURL
            self.caregiverToken = caregiverToken
        }

        func steps(report: (String) -> Void) throws {
            try runtimeLogin()
            report("ok  \(Step.runtimeLogin.rawValue)")
            step = .caregiverToken
            let caregiver = try register()
            report(
                "ok  \(Step.caregiverToken.rawValue) (caregiver \(caregiver.uuidString.lowercased()); device registered)"
            )
            step = .household
            let (patient, medication, session) = try household(caregiver: caregiver)
            report("ok  \(Step.household.rawValue) (patient \(patient.uuidString.lowercased()))")
            step = .record
            try record(medication: medication, session: session)
            report("ok  \(Step.record.rawValue)")
            step = .fcm
            let name = try pushAccepted(patient: patient)
            report("ok  \(Step.fcm.rawValue) (\(name))")
        }

        // MARK: runtime login

        /// DATABASE_URL logs in, as the runtime role, and runs a statement (through a transaction pooler, the server
        /// login happens only then).
        func runtimeLogin() throws {
            let user: String
            do {
                user = try resources.database.connection().query("SELECT current_user::text")[0]
                    .decode(String.self, at: 0)
            } catch let error as PostgresError {
                throw Failure(step: .runtimeLogin, reason: Self.loginFailure(error))
            }
            guard user == DeploymentCheck.runtimeRole else {
                throw Failure(
                    step: .runtimeLogin,
                    reason: "DATABASE_URL logs in as \(user), not \(DeploymentCheck.runtimeRole): the functions must "
                        + "run as the runtime role (docs/deploy.md#roles)")
            }
        }

        /// Why a login failed, from what the server or the pooler said, as a fixed text.
        static func loginFailure(_ error: PostgresError) -> String {
            let message = (error.serverMessage ?? "").lowercased()
            let role = DeploymentCheck.runtimeRole
            if message.contains("is not permitted to log in") {
                return "the runtime role \(role) has no login: give it one (deploy again, or "
                    + "ALTER ROLE \(role) LOGIN PASSWORD …; docs/deploy.md#roles)"
            }
            let poolerRefusals = [
                "tenant or user not found", "no such user", "\"trust\" authentication failed",
                "sasl authentication failed", "server login has been failing",
            ]
            if poolerRefusals.contains(where: message.contains) {
                return "the pooler refused the role \(role): add it to the pooler's users (PgBouncer's auth_file or "
                    + "auth_query; on Supabase's pooler the user is \(role).<project-ref>)"
            }
            if message.contains("password authentication failed") {
                return "the password in DATABASE_URL was refused for \(role)"
            }
            return "cannot connect with DATABASE_URL: \(error.connectionFailureReason)"
        }

        // MARK: register (the caregiver's token)

        /// `push-register` for the throwaway device, as the test account: the token is verified as the functions
        /// verify it. Returns the account's id.
        func register() throws -> UUID {
            let body = JSONValue.object([
                "token": .string(deviceToken), "platform": .string("ios"),
                "environment": .string(configuration.pushEnvironment?.rawValue ?? "DEV"),
            ])
            let (response, log) = invoke(PushRegister(), path: "/api/push/register", bearer: caregiverToken, body: body)
            if response.statusCode == 401 {
                let reason = log.first { $0["auth.reason"] != nil }?["auth.reason"]?.stringValue ?? "rejected"
                throw Failure(
                    step: .caregiverToken,
                    reason:
                        "the functions' JWT settings do not verify the token (\(reason)): check SUPABASE_JWT_SECRET, "
                        + "SUPABASE_JWKS_URL and SUPABASE_JWT_ISSUER against the project that issued it")
            }
            guard response.statusCode == 200 else {
                throw Failure(step: .caregiverToken, reason: "push-register answered \(Self.summary(response, log))")
            }
            registered = true
            guard let subject = Self.subject(of: caregiverToken) else {
                throw Failure(step: .caregiverToken, reason: "the token has no caregiver id (sub)")
            }
            return subject
        }

        /// The `sub` of a token the functions have just verified.
        static func subject(of token: String) -> UUID? {
            let parts = token.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 3, let payload = Base64URL.decode(parts[1]),
                let sub = (try? JSONValue.parse(payload))?["sub"]?.stringValue
            else { return nil }
            return UUID(uuidString: sub)
        }

        // MARK: the throwaway household

        /// A patient linked to the test account, a medication taken at 08:00 and a ten-minute patient session, made
        /// with the households login's functions.
        func household(caregiver: UUID) throws -> (patient: UUID, medication: UUID, session: String) {
            do {
                let connection = try PostgresConnection(url: householdsURL, applicationName: "caregiver-push-check")
                defer { connection.close() }
                return try connection.withTransaction { connection in
                    let patient = try connection.query(
                        "SELECT caregiver_push.household_create_patient(\(DeploymentCheck.householdName))"
                    )[0].decode(UUID.self, at: 0)
                    self.patient = patient
                    try connection.query("SELECT caregiver_push.household_link_caregiver(\(patient), \(caregiver))")
                    let medication = try connection.query(
                        """
                        SELECT caregiver_push.household_add_medication(
                            \(patient), \(DeploymentCheck.householdName), false, '2020-01-01', NULL, '{08:00}')
                        """
                    )[0].decode(UUID.self, at: 0)
                    let token = try connection.query(
                        "SELECT token FROM caregiver_push.household_issue_patient_session(\(patient), '10 minutes')"
                    )[0].decode(String.self, at: 0)
                    return (patient, medication, token)
                }
            } catch let error as PostgresError {
                patient = nil  // rolled back with the transaction
                throw Failure(step: .household, reason: Self.householdsFailure(error))
            }
        }

        static func householdsFailure(_ error: PostgresError) -> String {
            if (error.serverMessage ?? "").contains("is not permitted to log in") {
                return "the households role has no login: give it one "
                    + "(ALTER ROLE caregiver_push_households LOGIN PASSWORD …; docs/deploy.md#households)"
            }
            switch error.code {
            case .server:
                return "the households login was refused: \(error.serverMessage ?? "\(error.code)")"
            case .connectionFailed, .invalidConnectionString, .startupParameterRefused, .serverNotVerified:
                return "cannot connect with HOUSEHOLDS_DATABASE_URL: \(error.connectionFailureReason)"
            default:
                return "the households login's call failed: \(error.code)"
            }
        }

        // MARK: record, and the push it owes

        /// `dose-record` as the throwaway patient, for yesterday's 08:00 (Tokyo): one push owed to the device.
        func record(medication: UUID, session: String) throws {
            let yesterday = TokyoClock.dateString(of: Date().addingTimeInterval(-86_400))
            let body = JSONValue.object([
                "medicationId": .string(medication.uuidString.lowercased()),
                "scheduledAt": .string("\(yesterday)T08:00:00+09:00"),
            ])
            let (response, log) = invoke(DoseRecord(), path: "/api/dose-records", bearer: session, body: body)
            guard response.statusCode == 200,
                (try? JSONValue.parse(Array(response.body.utf8)))?["updatedCount"] == .number(1)
            else {
                throw Failure(step: .record, reason: "dose-record answered \(Self.summary(response, log))")
            }
        }

        /// The delivery the dose owed the device: sent, which for the check's configuration means FCM accepted it in
        /// validate-only mode. If not, why.
        func pushAccepted(patient: UUID) throws -> String {
            guard configuration.pushEnvironment != nil else {
                throw Failure(step: .fcm, reason: "PUSH_ENVIRONMENT is not DEV or PROD: the functions send nothing")
            }
            let rows: PostgresRows
            do {
                rows = try resources.database.connection().query(
                    """
                    SELECT d.status, coalesce(d.last_error, '')
                    FROM caregiver_push.push_deliveries d
                    JOIN caregiver_push.push_events e ON e.event_key = d.event_key
                    JOIN caregiver_push.push_devices v ON v.id = d.push_device_id
                    WHERE e.patient_id = \(patient) AND v.token = \(deviceToken)
                    """)
            } catch {
                throw Failure(step: .fcm, reason: "the outbox could not be read: \(error)")
            }
            guard rows.count == 1, let (status, lastError) = try? rows[0].decode((String, String).self) else {
                throw Failure(step: .fcm, reason: "the dose owed \(rows.count) deliveries to the device, not 1")
            }
            if status == "SENT" { return "FCM accepted the message" }
            // Not sent: the service account first (a refused token exchange leaves the delivery queued), then what
            // FCM said of the message.
            // The functions' own log of this is theirs to write; the check says it in its one line.
            let quiet = Logger(label: "check") { _ in SwiftLogNoOpLogHandler() }
            guard let provider = resources.push.tokenProvider(logger: quiet) else {
                throw Failure(
                    step: .fcm,
                    reason: "no usable FCM service account (FCM_SERVICE_ACCOUNT_JSON or FCM_SERVICE_ACCOUNT_FILE)")
            }
            do {
                _ = try provider.accessToken(
                    connection: try resources.database.connection(), timeoutMilliseconds: 10_000, logger: quiet)
            } catch let error as TokenExchangeError {
                throw Failure(
                    step: .fcm,
                    reason: "Google refused the service account \(provider.account.clientEmail): "
                        + "\(error.status.map(String.init) ?? "no answer") \(error.error)")
            } catch {
                throw Failure(step: .fcm, reason: "no FCM access token: \(error)")
            }
            throw Failure(
                step: .fcm,
                reason: "FCM refused the message (\(status)\(lastError.isEmpty ? "" : ": \(lastError)")) for project "
                    + "\(provider.account.projectID)")
        }

        // MARK: clean up

        /// Unregisters the device (the functions soft-disable it; the sweep's maintenance deletes it later) and
        /// deletes the household with all it recorded and owed.
        func cleanUp() -> Failure? {
            var failures: [String] = []
            if registered {
                let body = JSONValue.object(["token": .string(deviceToken)])
                let (response, log) = invoke(
                    PushUnregister(), path: "/api/push/unregister", bearer: caregiverToken, body: body)
                if response.statusCode != 200 {
                    failures.append("push-unregister answered \(Self.summary(response, log))")
                }
            }
            if let patient {
                do {
                    let connection = try PostgresConnection(url: householdsURL, applicationName: "caregiver-push-check")
                    defer { connection.close() }
                    try connection.query("SELECT caregiver_push.household_delete_patient(\(patient))")
                } catch {
                    failures.append(
                        Self.householdsFailure(error) + " (delete patient \(patient.uuidString.lowercased()) by hand)")
                }
            }
            return failures.isEmpty ? nil : Failure(step: .cleanUp, reason: failures.joined(separator: "; "))
        }

        // MARK: invocations

        /// One invocation of a function's handler with the deployment's configuration, as its host would make it;
        /// the response, and the log lines it wrote (parsed).
        func invoke(
            _ endpoint: some Endpoint, path: String, bearer: String, body: JSONValue
        ) -> (APIGatewayV2Response, [JSONValue]) {
            let lines = LogLines()
            var logger = Logger(label: endpoint.functionName) { label in
                JSONLogHandler(label: label) { line in lines.append(line) }
            }
            logger[metadataKey: "function"] = .string(endpoint.functionName)
            let requestID = "deployment-check-\(UUID().uuidString.lowercased())"
            let event = APIGatewayV2Request(
                routeKey: "POST \(path)", rawPath: path,
                headers: ["authorization": "Bearer \(bearer)", "content-type": "application/json"],
                requestContext: .init(
                    requestId: requestID, routeKey: "POST \(path)", http: .init(method: "POST", path: path)),
                body: String(decoding: JSONCoding.encode(body) ?? [], as: UTF8.self))
            var response = APIGatewayV2Response(statusCode: 500, headers: [:], body: "")
            let handler = EndpointHandler(
                endpoint,
                service: CaregiverService(configuration: configuration, logger: logger, database: resources.database))
            let writer = ResponseWriter<APIGatewayV2Response>.inMemory(logger: logger) { response = $0 }
            handler.handle(InvocationInput(eventBytes: JSONCoding.encode(event) ?? []), writer: writer)
            let log = lines.all.compactMap { try? JSONValue.parse(Array($0.utf8)) }
            return (response, log)
        }

        /// A response's status and problem title, and the error its function logged: never its body as is.
        static func summary(_ response: APIGatewayV2Response, _ log: [JSONValue]) -> String {
            let title = (try? JSONValue.parse(Array(response.body.utf8)))?["title"]?.stringValue
            let logged = log.first { $0["level"] == .string("error") }.flatMap { line -> String? in
                guard let message = line["msg"]?.stringValue else { return nil }
                let detail = ["db.sqlstate", "config.variable", "error.type"].compactMap { key in
                    line[key]?.stringValue.map { "\(key) \($0)" }
                }
                return ([message] + detail).joined(separator: ", ")
            }
            return "\(response.statusCode)" + (title.map { " \($0)" } ?? "") + (logged.map { " (logged: \($0))" } ?? "")
        }
    }
}

/// The lines a handler logged during one of the check's invocations.
private final class LogLines: Sendable {
    private let lines = Mutex<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}

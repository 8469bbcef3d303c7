import Codecs
import Libpq
import Curl
import FunctionRuntime
import Migrations
import FoundationEssentials
import Logging

/// `db-migrate`: a CloudFormation custom resource that applies the migrations when the stack is created or updated
/// (answering as CloudFormation expects: a `PUT` to the pre-signed URL; docs/deploy.md, "Migrations on deploy").
///
/// The event is CloudFormation's request; the answer is a `PUT` of JSON with an empty `Content-Type` to its
/// pre-signed `ResponseURL`. Every request that names a `ResponseURL` is answered, success or not, since a resource
/// that never answers leaves the stack waiting for an hour. `Delete` succeeds without touching the database: removing
/// the stack must never drop the data. The `Reason` of a failure names the kind of failure and the log stream, never
/// the database URL or the server's message (those go to the log).
///
/// Bounded on both sides (docs/deploy.md, "Migrations on deploy"): the migrations run under a lock timeout and a
/// statement timeout that fit in the invocation's deadline less ``answerReserve``, so a lock held elsewhere (a
/// running `push-sweep`, the open session of an earlier run that was killed) fails the deploy with a reason in
/// seconds instead of stalling every request queued behind the DDL's lock; a database that stops answering
/// altogether is given up on by the client (``answerGrace``); and the answer goes only to
/// CloudFormation's own pre-signed S3 hosts in the function's own region (``isCloudFormationResponseURL(_:region:)``).
public final class MigrationsCustomResource: InvocationHandler {
    public let functionName = FunctionName.dbMigrate.rawValue
    /// The process's configuration (secrets read at run time renewed between invocations) and log.
    public let service: CaregiverService
    public var configuration: Configuration { service.configuration }
    public var logger: Logger { service.logger }
    /// Where the `NNNNNN_name.up.sql` files are.
    public let migrationsDirectory: URL
    /// `AWS_REGION`: the function's region (Lambda sets it). CloudFormation answers through the response bucket of the
    /// stack's region, which is the function's; a bucket of any other region is someone else's to have created (S3
    /// bucket names are first come, first served). Without it no CloudFormation URL is accepted.
    public let region: String?

    /// The physical id of the one resource this function manages (CloudFormation keeps it across updates).
    static let physicalResourceID = "caregiver-push-database-migrations"
    /// CloudFormation's limit for the whole response body.
    static let responseLimit = 4096
    /// What is kept of the invocation's time for answering CloudFormation (at most three `PUT`s and their pauses).
    static let answerReserve: Duration = .seconds(12)
    /// How long after its own time limit the migration waits for the database's answer before giving up on the
    /// connection (``PostgresConnection/answerDeadline``): the server's own timeouts answer by then if it can.
    static let answerGrace: Duration = .seconds(2)
    /// The budget without a deadline (one-shot on stdin): the template's 300 s timeout less the reserve, rounded down.
    static let budgetWithoutDeadline: Duration = .seconds(280)
    /// The longest wait for one lock (another migrator's lock on the history, a table lock of a running function).
    /// Requests queue behind DDL that waits for its lock: this is how long they may be held up, per attempt.
    static let lockTimeout: Duration = .seconds(5)
    /// Attempts when a lock is not granted in time (the other side's transactions are short: a second try often
    /// finds the lock free).
    static let lockAttempts = 3

    public init(
        service: CaregiverService, migrationsDirectory: URL, region: String? = nil
    ) {
        self.region = region.flatMap { $0.isEmpty ? nil : $0 }
        self.service = service
        self.migrationsDirectory = migrationsDirectory
    }

    /// For tests and in-process hosts: over `configuration`, logging to `logger`, reading no secret.
    public convenience init(
        configuration: Configuration, logger: Logger, migrationsDirectory: URL, region: String? = nil
    ) {
        self.init(
            service: CaregiverService(configuration: configuration, logger: logger),
            migrationsDirectory: migrationsDirectory, region: region)
    }

    /// `MIGRATIONS_DIR` when set; else `migrations/` in `LAMBDA_TASK_ROOT` (where Lambda unpacks the zip); else
    /// `migrations/` next to the executable.
    public static func migrationsDirectory(environment: [String: String]) -> URL {
        if let directory = environment["MIGRATIONS_DIR"], !directory.isEmpty {
            return URL(fileURLWithPath: directory)
        }
        if let root = environment["LAMBDA_TASK_ROOT"], !root.isEmpty {
            return URL(fileURLWithPath: root).appendingPathComponent("migrations")
        }
        return URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("migrations")
    }

    /// The request fields the answer echoes.
    struct Request {
        var requestType: String?
        var responseURL: String
        var stackID: String?
        var requestID: String?
        var logicalResourceID: String?
        var physicalResourceID: String?
    }

    /// The body CloudFormation reads from `ResponseURL`.
    struct CloudFormationResponse: Encodable {
        var status: String
        var reason: String
        var physicalResourceID: String
        var stackID: String
        var requestID: String
        var logicalResourceID: String
        var data: [String: String]?

        enum CodingKeys: String, CodingKey {
            case status = "Status", reason = "Reason", physicalResourceID = "PhysicalResourceId"
            case stackID = "StackId", requestID = "RequestId", logicalResourceID = "LogicalResourceId", data = "Data"
        }
    }

    /// What the invocation returns to its host (the Runtime API or stdout): the outcome, never the URL.
    struct Summary: Encodable, Sendable {
        var requestType: String
        var status: String
        var applied: [String]
        var responded: Bool
    }

    public var metricsNamespace: String { configuration.metricsNamespace }

    /// Applies the migrations and answers CloudFormation, then answers the host once with the summary.
    public func willInvoke() { service.renewIfPastGrace() }
    public func didInvoke(deadline: ContinuousClock.Instant?) { service.renewIfDue(deadline: deadline) }
    public func finish() { service.close() }

    public func handle(_ input: InvocationInput, writer: ResponseWriter<AnyDocument>) {
        // A response the host could not deliver is the host's to log; CloudFormation has had its answer.
        try? writer.write(summary(of: input))
    }

    private func summary(of input: InvocationInput) -> AnyDocument {
        let request: Request
        do {
            request = try Self.parse(input.eventBytes, region: region)
        } catch {
            // Nowhere to answer: the event is not CloudFormation's. Nothing was changed.
            logger.error("event is not a custom-resource request", metadata: ["error": .string(error.detail)])
            return AnyDocument(error)
        }
        var log = logger
        log[metadataKey: "requestId"] = .string(request.requestID.map { String($0.prefix(128)) } ?? "")
        log[metadataKey: "customResource.requestType"] = .string(
            request.requestType.map { String($0.prefix(16)) } ?? "")
        // Everything is measured against the host's deadline (the Runtime API's); one-shot has none.
        let deadline = input.deadline ?? (ContinuousClock.now + Self.budgetWithoutDeadline + Self.answerReserve)
        let (response, applied) = outcome(of: request, workUntil: deadline - Self.answerReserve, logger: log)
        let responded = respond(response, to: request.responseURL, answerBy: deadline, logger: log)
        let summary = Summary(
            requestType: request.requestType.map { String($0.prefix(16)) } ?? "", status: response.status,
            applied: applied, responded: responded)
        return AnyDocument(summary)
    }

    public func oversizedEvent(limit: Int) -> AnyDocument {
        logger.error("invocation event exceeds the size limit", metadata: ["limit": "\(limit)"])
        return AnyDocument(Problem.badRequest("The event is too large."))
    }

    /// The request's fields; only `ResponseURL` is needed to answer at all (the others are checked by ``outcome``).
    /// - Throws: a 400 ``Problem`` when the event is not a JSON object with a `ResponseURL` of CloudFormation's
    ///   (nothing is run and nothing is sent: whoever may invoke the function cannot make it send to any address).
    /// - Parameter region: `AWS_REGION`; CloudFormation's URLs are accepted only for this region's bucket.
    static func parse(_ bytes: [UInt8], region: String?) throws(Problem) -> Request {
        let members = try Problem.eventMembers(bytes, expected: "a CloudFormation custom-resource request")
        guard let url = members["ResponseURL"]?.stringValue, url.utf8.count <= 8192,
            isCloudFormationResponseURL(url, region: region)
        else {
            throw .badRequest(
                "The event has no ResponseURL of CloudFormation's: it is not a CloudFormation custom-resource request.")
        }
        return Request(
            requestType: members["RequestType"]?.stringValue, responseURL: url,
            stackID: members["StackId"]?.stringValue, requestID: members["RequestId"]?.stringValue,
            logicalResourceID: members["LogicalResourceId"]?.stringValue,
            physicalResourceID: members["PhysicalResourceId"]?.stringValue)
    }

    /// Whether `url` is one CloudFormation hands out in `region`: `https://` to that region's response bucket on S3
    /// (`cloudformation-custom-resource-response-<region without dashes>.s3.amazonaws.com`, or the regional forms
    /// `….s3.<region>.amazonaws.com`, `….s3-<region>.amazonaws.com`, and `.amazonaws.com.cn` in China), no user
    /// information, no port. The bucket's region, and the host's when it names one, must be `region`.
    static func isCloudFormationResponseURL(_ url: String, region: String?) -> Bool {
        guard let region, url.hasPrefix("https://") else { return false }
        let authority = url.dropFirst("https://".count).prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let bucket = "cloudformation-custom-resource-response-"
        guard authority.hasPrefix(bucket) else { return false }
        let rest = authority.dropFirst(bucket.count)
        let bucketRegion = rest.prefix { $0 != "." }
        guard !bucketRegion.isEmpty, bucketRegion == region.filter({ $0 != "-" }) else { return false }
        var host = rest.dropFirst(bucketRegion.count)
        for suffix in [".amazonaws.com", ".amazonaws.com.cn"] where host.hasSuffix(suffix) {
            host = host.dropLast(suffix.count)
            // `.s3`, `.s3.<region>`, `.s3-<region>` (a region: lowercase letters, digits and dashes).
            guard host.hasPrefix(".s3") else { return false }
            let regional = host.dropFirst(".s3".count)
            if regional.isEmpty { return true }
            guard let first = regional.first, first == "." || first == "-" else { return false }
            return regional.dropFirst() == region
        }
        return false
    }

    /// Runs the request and builds its answer; returns the versions applied.
    /// - Parameter workUntil: when the migrations must have finished or failed, so that the answer still fits.
    func outcome(
        of request: Request, workUntil: ContinuousClock.Instant, logger: Logger
    ) -> (CloudFormationResponse, [String]) {
        var response = CloudFormationResponse(
            status: "FAILED", reason: "", physicalResourceID: request.physicalResourceID ?? Self.physicalResourceID,
            stackID: request.stackID ?? "", requestID: request.requestID ?? "",
            logicalResourceID: request.logicalResourceID ?? "")
        let missing = [
            ("RequestType", request.requestType), ("StackId", request.stackID), ("RequestId", request.requestID),
            ("LogicalResourceId", request.logicalResourceID),
        ].filter { $0.1?.isEmpty ?? true }.map(\.0)
        guard missing.isEmpty else {
            response.reason = "The request lacks \(missing.joined(separator: ", ")); nothing was done."
            logger.error(
                "custom-resource request is incomplete", metadata: ["missing": .string(missing.joined(separator: ","))])
            return (response, [])
        }
        switch request.requestType {
        case "Delete":
            // The stack (or this resource) goes away; the data stays. Nothing to undo.
            response.status = "SUCCESS"
            response.reason = "Delete leaves the database as it is."
            logger.info("custom-resource delete: database left as it is")
            return (response, [])
        case "Create", "Update":
            break
        default:
            response.reason = "Unknown RequestType; nothing was done."
            logger.error("custom-resource request has an unknown RequestType")
            return (response, [])
        }
        let seeLog = Self.logPointer()
        guard let url = configuration.databaseURL else {
            response.reason = "DATABASE_URL is not set; no migration was applied.\(seeLog)"
            logger.error(
                "function is misconfigured",
                metadata: ["config.variable": "DATABASE_URL", "config.reason": "is not set"])
            return (response, [])
        }
        // The runtime role's login (RuntimeLogin), checked before anything is applied.
        let login: RuntimeLogin?
        do {
            login = try RuntimeLogin(configuration: configuration)
        } catch {
            response.reason = "The runtime role's login cannot be given: \(error); no migration was applied.\(seeLog)"
            logger.error("function is misconfigured", metadata: ["config.reason": .string(error.description)])
            return (response, [])
        }
        let migrator: Migrator
        do {
            migrator = try Migrator(directory: migrationsDirectory)
        } catch {
            response.reason = "The migrations directory cannot be read; no migration was applied.\(seeLog)"
            logger.error("migrations cannot be read", metadata: ["error": .string("\(error)")])
            return (response, [])
        }
        let connection: PostgresConnection
        do {
            // A connection of its own, with bounds of its own (below): a migration may take longer than a request.
            connection = try PostgresConnection(url: url, applicationName: "caregiver-push-db-migrate")
        } catch {
            response.reason = "Cannot connect to the database (DATABASE_URL); no migration was applied.\(seeLog)"
            // libpq's text repeats what it could not parse of the URL (a password with a raw `@` or `/`): only its
            // kind is logged.
            logger.error(
                "database unreachable", metadata: ["db.reason": .string(error.connectionFailureReason)])
            return (response, [])
        }
        defer { connection.close() }
        // The server-side bounds below end every statement by `workUntil`, but their answer can be lost on the way
        // (a failover, a partition behind a pooler that still acknowledges): the connection then gives up on its own
        // shortly after, still well inside the reserve for answering.
        connection.answerDeadline = workUntil + Self.answerGrace
        do {
            let applied = try migrate(migrator, on: connection, until: workUntil, logger: logger)
            if let login {
                do {
                    try login.apply(on: connection, logger: logger)
                } catch {
                    let state = (error as? PostgresError)?.sqlState.map { " (SQLSTATE \($0.rawValue))" } ?? ""
                    response.reason =
                        "The migrations are applied, but \(login.role) could not be given its login\(state).\(seeLog)"
                    logger.error(
                        "runtime role login not given",
                        metadata: ["error": .string((error as? PostgresError)?.debugDescription ?? "\(error)")])
                    return (response, applied)
                }
            }
            response.status = "SUCCESS"
            response.reason =
                applied.isEmpty ? "The database was up to date." : "Applied \(applied.joined(separator: ", "))."
            response.data = [
                "Applied": applied.joined(separator: ","), "Latest": migrator.migrations.last?.version ?? "",
            ]
            logger.info(
                "migrations up to date", metadata: ["migration.applied": .stringConvertible(applied.count)])
            return (response, applied)
        } catch let error as PostgresError {
            let state = error.sqlState.map { " (SQLSTATE \($0.rawValue))" } ?? ""
            let kind =
                switch error.sqlState {
                case _ where error.code == .noAnswer: " when the database stopped answering"
                case .lockNotAvailable?: " waiting for a lock held by another session"
                case .queryCanceled?: " at its time limit"
                default: ""
                }
            response.reason = "A migration failed\(kind)\(state); the database is as it was before.\(seeLog)"
            logger.error(
                "migration failed", metadata: ["error": .string(error.debugDescription)])
            return (response, [])
        } catch {
            response.reason = "A migration failed; the database is as it was before.\(seeLog)"
            logger.error("migration failed", metadata: ["error": .string("\(error)")])
            return (response, [])
        }
    }

    /// Runs the migrations under bounds that end before `until`: a lock timeout of ``lockTimeout`` and a statement
    /// timeout (and an idle-in-transaction timeout) of what is left; a lock not granted in time is tried again, up
    /// to ``lockAttempts`` times while the time left allows a whole lock wait.
    func migrate(
        _ migrator: Migrator, on connection: PostgresConnection, until: ContinuousClock.Instant, logger: Logger
    ) throws -> [String] {
        var attempt = 1
        while true {
            let left = until - .now
            guard left > .milliseconds(100) else {
                throw PostgresError(
                    .server, sqlState: .queryCanceled, serverMessage: "no time left before the deadline")
            }
            let lock = min(Self.lockTimeout, left)
            connection.transactionSettings = TransactionSettings(
                lockTimeoutMilliseconds: max(lock.milliseconds, 1),
                statementTimeoutMilliseconds: max(left.milliseconds, 1))
            do {
                return try migrator.migrate(connection, logger: logger)
            } catch let error as PostgresError
                where error.sqlState == .lockNotAvailable && attempt < Self.lockAttempts
                && until - .now > Self.lockTimeout + .seconds(attempt)
            {
                logger.warning(
                    "migration waited too long for a lock; trying again",
                    metadata: ["db.sqlstate": "55P03", "db.attempt": .stringConvertible(attempt)])
                ThreadSleep.sleep(for: .seconds(attempt))
                attempt += 1
            }
        }
    }

    /// " See CloudWatch log stream …" on Lambda, where the cause is; empty elsewhere.
    static func logPointer() -> String {
        guard let stream = ProcessInfo.processInfo.environment["AWS_LAMBDA_LOG_STREAM_NAME"], !stream.isEmpty,
            stream.utf8.count <= 512
        else { return "" }
        return " See CloudWatch log stream \(stream)."
    }

    /// PUTs `response` to the pre-signed URL (empty `Content-Type`, as its signature expects); three tries, none
    /// past `answerBy` less a second. Returns whether S3 took it.
    func respond(
        _ response: CloudFormationResponse, to url: String, answerBy: ContinuousClock.Instant, logger: Logger
    ) -> Bool {
        var response = response
        let encoder = JSONCoding.encoder()
        guard var body = try? encoder.encode(response) else { return false }
        if body.count > Self.responseLimit {
            response.reason = String(response.reason.prefix(256))
            response.data = nil
            guard let shorter = try? encoder.encode(response) else { return false }
            body = shorter
        }
        let request = CurlRequest(method: "PUT", url: url, headers: [("Content-Type", "")], body: Array(body))
        for attempt in 1...3 {
            let left = (answerBy - .now - .seconds(1)).milliseconds
            guard left >= 100 else {
                logger.error("custom-resource response not delivered before the deadline")
                return false
            }
            switch CurlClient.perform(request, timeoutMilliseconds: min(10_000, left)) {
            case .success(let answer) where (200..<300).contains(answer.status):
                logger.info(
                    "custom-resource response delivered", metadata: ["customResource.status": .string(response.status)])
                return true
            case .success(let answer):
                logger.error(
                    "custom-resource response refused",
                    metadata: [
                        "http.status": .stringConvertible(answer.status), "attempt": .stringConvertible(attempt),
                    ])
                // A 4xx (an expired or mis-signed URL) will not get better.
                if answer.status < 500 { return false }
            case .failure(let error):
                logger.error(
                    "custom-resource response not delivered",
                    metadata: ["error": .string(error.description), "attempt": .stringConvertible(attempt)])
            }
            if attempt < 3, answerBy - .now > .seconds(attempt + 2) { ThreadSleep.sleep(for: .seconds(attempt)) }
        }
        return false
    }
}

extension RuntimeLogin {
    /// `db-migrate`'s: `nil` when its configuration names no runtime connection.
    /// - Throws: ``Failure`` naming `RUNTIME_DATABASE_SECRET_ARN` when that secret could not be read or understood.
    init?(configuration: Configuration) throws(Failure) {
        if let error = configuration.errors.first(where: { $0.variable == "RUNTIME_DATABASE_SECRET_ARN" }) {
            throw Failure(description: "RUNTIME_DATABASE_SECRET_ARN \(error.reason)")
        }
        guard let url = configuration.runtimeDatabaseURL else { return nil }
        try self.init(runtimeConnection: url)
    }
}

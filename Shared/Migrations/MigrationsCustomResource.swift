import Codecs
import Libpq
import Curl
import FunctionRuntime
import CaregiverPush
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
public struct MigrationsCustomResource: InvocationHandling {
    public let functionName = "db-migrate"
    public let configuration: Configuration
    public let logger: Logger
    /// Where the `NNNNNN_name.up.sql` files are.
    public let migrationsDirectory: URL

    /// The physical id of the one resource this function manages (CloudFormation keeps it across updates).
    static let physicalResourceID = "caregiver-push-database-migrations"
    /// CloudFormation's limit for the whole response body.
    static let responseLimit = 4096

    public init(configuration: Configuration, logger: Logger, migrationsDirectory: URL) {
        self.configuration = configuration
        self.logger = logger
        self.migrationsDirectory = migrationsDirectory
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
    struct Response: Encodable {
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

    public func release(_ resources: FunctionResources) {
        resources.release()
    }

    public func handle(_ input: InvocationInput, resources: FunctionResources) -> InvocationOutput<AnyDocument> {
        let request: Request
        do {
            request = try Self.parse(input.eventBytes)
        } catch {
            // Nowhere to answer: the event is not CloudFormation's. Nothing was changed.
            logger.error("event is not a custom-resource request", metadata: ["error": .string(error.detail)])
            return InvocationOutput(document: AnyDocument(error))
        }
        var log = logger
        log[metadataKey: "requestId"] = .string(request.requestID.map { String($0.prefix(128)) } ?? "")
        log[metadataKey: "customResource.requestType"] = .string(
            request.requestType.map { String($0.prefix(16)) } ?? "")
        let (response, applied) = outcome(of: request, logger: log)
        let responded = respond(response, to: request.responseURL, logger: log)
        let summary = Summary(
            requestType: request.requestType.map { String($0.prefix(16)) } ?? "", status: response.status,
            applied: applied, responded: responded)
        return InvocationOutput(document: AnyDocument(summary))
    }

    public func oversizedEvent(limit: Int) -> InvocationOutput<AnyDocument> {
        logger.error("invocation event exceeds the size limit", metadata: ["limit": "\(limit)"])
        return InvocationOutput(document: AnyDocument(Problem.badRequest("The event is too large.")))
    }

    /// The request's fields; only `ResponseURL` is needed to answer at all (the others are checked by ``outcome``).
    /// - Throws: a 400 ``Problem`` when the event is not a JSON object with an `http(s)` `ResponseURL`.
    static func parse(_ bytes: [UInt8]) throws(Problem) -> Request {
        let members = try Problem.eventMembers(bytes, expected: "a CloudFormation custom-resource request")
        guard let url = members["ResponseURL"]?.stringValue,
            url.hasPrefix("https://") || url.hasPrefix("http://"), url.utf8.count <= 8192
        else {
            throw .badRequest("The event has no ResponseURL: it is not a CloudFormation custom-resource request.")
        }
        return Request(
            requestType: members["RequestType"]?.stringValue, responseURL: url,
            stackID: members["StackId"]?.stringValue, requestID: members["RequestId"]?.stringValue,
            logicalResourceID: members["LogicalResourceId"]?.stringValue,
            physicalResourceID: members["PhysicalResourceId"]?.stringValue)
    }

    /// Runs the request and builds its answer; returns the versions applied.
    func outcome(of request: Request, logger: Logger) -> (Response, [String]) {
        var response = Response(
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
            // A connection of its own, without the functions' statement_timeout: a migration may take longer.
            connection = try PostgresConnection(url: url, applicationName: "caregiver-push-db-migrate")
        } catch {
            response.reason = "Cannot connect to the database (DATABASE_URL); no migration was applied.\(seeLog)"
            logger.error("database unreachable", metadata: ["error": .string(error.serverMessage ?? "\(error)")])
            return (response, [])
        }
        defer { connection.close() }
        do {
            let applied = try migrator.migrate(connection, logger: logger)
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
            response.reason = "A migration failed\(state); the database is as it was before.\(seeLog)"
            logger.error(
                "migration failed", metadata: ["error": .string(error.debugDescription)])
            return (response, [])
        } catch {
            response.reason = "A migration failed; the database is as it was before.\(seeLog)"
            logger.error("migration failed", metadata: ["error": .string("\(error)")])
            return (response, [])
        }
    }

    /// " See CloudWatch log stream …" on Lambda, where the cause is; empty elsewhere.
    static func logPointer() -> String {
        guard let stream = ProcessInfo.processInfo.environment["AWS_LAMBDA_LOG_STREAM_NAME"], !stream.isEmpty,
            stream.utf8.count <= 512
        else { return "" }
        return " See CloudWatch log stream \(stream)."
    }

    /// PUTs `response` to the pre-signed URL (empty `Content-Type`, as its signature expects); three tries. Returns
    /// whether S3 took it.
    func respond(_ response: Response, to url: String, logger: Logger) -> Bool {
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
            switch CurlClient.perform(request, timeoutMilliseconds: 10_000) {
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
            if attempt < 3 { ThreadSleep.sleep(for: .seconds(attempt)) }
        }
        return false
    }
}

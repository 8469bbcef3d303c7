import Codecs
/// An RFC 9457 problem: the body of every non-2xx response.
///
/// Endpoints throw problems (or errors that ``ProblemConvertible`` turns into one); the application's handler is the
/// one place that turns them into `application/problem+json`. Anything else that is thrown becomes a bare 500.
public struct Problem: Error, Equatable, Sendable {
    /// One invalid field of a request body.
    public struct FieldError: Codable, Equatable, Sendable {
        public let field: String
        public let message: String
        public init(field: String, message: String) {
            self.field = field
            self.message = message
        }
    }

    /// A relative URI naming the kind of problem; the README lists them.
    public let type: String
    public let title: String
    public let status: Int
    public let detail: String
    public let errors: [FieldError]?
    /// Response headers that belong to this problem (`WWW-Authenticate`, `Retry-After`, `Allow`).
    public let headers: [String: String]

    public init(
        type: String, title: String, status: Int, detail: String, errors: [FieldError]? = nil,
        headers: [String: String] = [:]
    ) {
        self.type = type
        self.title = title
        self.status = status
        self.detail = detail
        self.errors = errors
        self.headers = headers
    }
}

/// An error that knows which problem response it is (Hummingbird's `HTTPResponseError`, for problem details).
public protocol ProblemConvertible: Error {
    var problem: Problem { get }
}

extension Problem: ProblemConvertible {
    public var problem: Problem { self }
}

extension Problem {
    public static func badRequest(_ detail: String) -> Problem {
        Problem(type: "/problems/bad-request", title: "Bad Request", status: 400, detail: detail)
    }

    /// 401 with `WWW-Authenticate: Bearer`; the detail never says which check failed.
    public static func unauthorized(_ detail: String = "A valid bearer token is required.") -> Problem {
        Problem(
            type: "/problems/unauthorized", title: "Unauthorized", status: 401, detail: detail,
            headers: ["www-authenticate": "Bearer"])
    }

    public static func forbidden(_ detail: String) -> Problem {
        Problem(type: "/problems/forbidden", title: "Forbidden", status: 403, detail: detail)
    }

    public static func notFound(_ detail: String) -> Problem {
        Problem(type: "/problems/not-found", title: "Not Found", status: 404, detail: detail)
    }

    public static func methodNotAllowed(allow: String) -> Problem {
        Problem(
            type: "/problems/method-not-allowed", title: "Method Not Allowed", status: 405,
            detail: "This endpoint accepts \(allow) only.", headers: ["allow": allow])
    }

    public static func payloadTooLarge(limit: Int) -> Problem {
        Problem(
            type: "/problems/payload-too-large", title: "Content Too Large", status: 413,
            detail: "The request body must be at most \(limit) bytes.")
    }

    public static func unsupportedMediaType() -> Problem {
        Problem(
            type: "/problems/unsupported-media-type", title: "Unsupported Media Type", status: 415,
            detail: "The request body must be JSON (Content-Type: application/json).",
            headers: ["accept": "application/json"])
    }

    public static func validation(_ errors: [FieldError]) -> Problem {
        Problem(
            type: "/problems/validation", title: "Unprocessable Content", status: 422,
            detail: "The request body has invalid fields.", errors: errors)
    }

    public static func unprocessable(_ detail: String) -> Problem {
        Problem(type: "/problems/unprocessable", title: "Unprocessable Content", status: 422, detail: detail)
    }

    /// 500 with nothing of the cause in it: the cause goes to the log.
    public static func internalError() -> Problem {
        Problem(
            type: "/problems/internal", title: "Internal Server Error", status: 500,
            detail: "The request could not be completed. It has been logged.")
    }

    /// 503 with `Retry-After`, for an unreachable database.
    public static func serviceUnavailable(retryAfterSeconds: Int = 5) -> Problem {
        Problem(
            type: "/problems/unavailable", title: "Service Unavailable", status: 503,
            detail: "The service is temporarily unavailable. Retry later.",
            headers: ["retry-after": String(retryAfterSeconds)])
    }
}

extension Problem: Encodable {
    private enum CodingKeys: String, CodingKey {
        case type, title, status, detail, errors
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(type, forKey: .type)
        try container.encode(title, forKey: .title)
        try container.encode(status, forKey: .status)
        try container.encode(detail, forKey: .detail)
        try container.encodeIfPresent(errors, forKey: .errors)
    }
}

extension Problem {
    /// The members of an event that must be a JSON object (a scheduled event, a custom-resource request).
    /// - Parameter expected: what the event should have been, for the 400's detail.
    /// - Throws: a 400 ``Problem`` when the bytes are not JSON, or not an object.
    public static func eventMembers(_ bytes: [UInt8], expected: String) throws(Problem) -> [String: JSONValue] {
        let document: JSONValue
        do {
            document = try JSONValue.parse(bytes)
        } catch {
            throw .badRequest("The event is not valid JSON.")
        }
        guard let members = document.objectValue else {
            throw .badRequest("The event must be a JSON object: \(expected).")
        }
        return members
    }
}

import Codecs
import FoundationEssentials
import FunctionRuntime
import Libpq

/// A request body that has passed the generic checks: JSON content type (else 415), one well-formed JSON document
/// without duplicate member names (else 400), and an object (else 400). Fields are then read through a
/// ``FieldValidator``, which collects every invalid field before answering 422. Unknown fields are ignored.
public struct RequestBody: Sendable {
    public let members: [String: JSONValue]

    /// Checks the content type and parses the body.
    /// - Throws: ``Problem`` 415 or 400.
    public init(_ request: FunctionRequest) throws(Problem) {
        guard let contentType = request.header("content-type"), Self.isJSON(contentType) else {
            throw .unsupportedMediaType()
        }
        guard !request.body.isEmpty else { throw .badRequest("The request body is empty; a JSON object is expected.") }
        let document: JSONValue
        do {
            document = try JSONValue.parse(request.body)
        } catch {
            throw .badRequest("The request body is not valid JSON (\(error.reason.rawValue) at byte \(error.offset)).")
        }
        guard let members = document.objectValue else {
            throw .badRequest("The request body must be a JSON object, not \(document.kindName).")
        }
        self.members = members
    }

    /// `application/json`, or any `application/…+json`, with or without parameters.
    static func isJSON(_ contentType: String) -> Bool {
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first.map {
            $0.trimmingOptionalWhitespace().lowercased()
        }
        guard let mediaType else { return false }
        return mediaType == "application/json" || (mediaType.hasPrefix("application/") && mediaType.hasSuffix("+json"))
    }
}

/// Reads fields of a ``RequestBody`` and collects what is wrong with them.
public struct FieldValidator {
    package let members: [String: JSONValue]
    public private(set) var errors: [Problem.FieldError] = []

    public init(_ body: RequestBody) {
        members = body.members
    }

    public mutating func reject(_ field: String, _ message: String) {
        errors.append(Problem.FieldError(field: field, message: message))
    }

    /// A string field. Absent (or `null`) → `nil`, and an error "`field` is required" when `required`.
    /// A non-string, or a string failing `isValid`, records `invalidMessage`.
    public mutating func string(
        _ field: String, required: Bool, invalidMessage: String, isValid: (String) -> Bool = { _ in true }
    ) -> String? {
        guard let value = members[field], value != .null else {
            if required { reject(field, "\(field) is required") }
            return nil
        }
        guard let string = value.stringValue, isValid(string) else {
            reject(field, invalidMessage)
            return nil
        }
        return string
    }

    /// A field that must be one of `allowed` (case-sensitive); absence and anything else record `message`.
    public mutating func oneOf<Value: RawRepresentable<String>>(
        _ field: String, _ type: Value.Type, message: String
    ) -> Value? {
        guard let raw = members[field]?.stringValue, let value = Value(rawValue: raw) else {
            reject(field, message)
            return nil
        }
        return value
    }

    /// Ends validation. - Throws: ``Problem`` 422 listing every invalid field, when there is any.
    public func finish() throws(Problem) {
        guard errors.isEmpty else { throw .validation(errors) }
    }
}

extension FieldValidator {
    /// An optional UUID field; a present non-UUID records "`field` must be a UUID".
    public mutating func uuid(_ field: String, required: Bool) -> UUID? {
        string(field, required: required, invalidMessage: "\(field) must be a UUID") { UUID(exactly: $0) != nil }
            .flatMap(UUID.init(exactly:))
    }

    /// The instants a timestamp field may name: 1970-01-01T00:00:00Z up to 2999-12-31T23:59:59Z. RFC 3339 can
    /// write year 0000 (which PostgreSQL, with no year 0, refuses) and an offset can carry 0001-01-01 into it, or
    /// 9999-12-31 into a five-digit year; nothing this service records lies outside these bounds, so such a value is
    /// the field's fault (422), never the database's (500).
    public static let instantRange =
        Date(timeIntervalSince1970: 0)...Date(timeIntervalSince1970: 32_503_679_999)

    /// An RFC 3339 date-time with an offset, within ``instantRange``.
    public mutating func instant(_ field: String, required: Bool) -> (date: Date, text: String)? {
        guard
            let text = string(
                field, required: required,
                invalidMessage: "\(field) must be an RFC 3339 date-time with a time-zone offset",
                isValid: { Timestamp.parseRFC3339($0) != nil })
        else { return nil }
        guard let date = Timestamp.parseRFC3339(text), Self.instantRange.contains(date) else {
            reject(field, "\(field) must lie between 1970-01-01T00:00:00Z and 2999-12-31T23:59:59Z")
            return nil
        }
        return (date, text)
    }
}

// The fields every endpoint reads the same way: a flag and an id of one of the app's rows.

extension FieldValidator {
    /// An optional boolean; absent or `null` is `false`, anything but `true`/`false` records "`field` must be a
    /// boolean".
    mutating func flag(_ field: String) -> Bool {
        guard let value = members[field], value != .null else { return false }
        guard case .bool(let flag) = value else {
            reject(field, "\(field) must be a boolean")
            return false
        }
        return flag
    }

    /// An id of one of the app's rows (``AppID``); a present string that is not one records "`field` must be an id".
    mutating func appID(_ field: String, required: Bool) -> AppID? {
        string(
            field, required: required,
            invalidMessage: "\(field) must be an id (1 to \(AppID.maximumLength) letters, digits, '-', '_', '.' or ':')"
        ) { AppID($0) != nil }.flatMap(AppID.init)
    }
}

/// The id of one of the app's own rows — a patient, a medication, a dose or PRN record, a patient session — as the
/// app stores it (docs/behaviour.md#data-contract): a UUID, a Prisma `cuid()`, or an id like `patient-123`.
///
/// The functions never make one up from a type of their own: whatever the app's column is (`uuid` or `text`), the id
/// crosses requests, payloads, event keys and the outbox as this text, and PostgreSQL reads the parameter as the
/// column's type. Text that a `uuid` column cannot hold is an id no row has (404, never a 500).
public struct AppID: Hashable, Sendable, Comparable, CustomStringConvertible, PostgresEncodable, PostgresDecodable {
    /// The most characters an id may have: a UUID is 36, a cuid 25; event keys hold one within their 200.
    public static let maximumLength = 100

    public let text: String

    /// `nil` unless `text` is 1 to ``maximumLength`` characters of `A-Z a-z 0-9 - _ . :` — what ids are made of, and
    /// nothing a log line, an event key or a URL would have to escape. A UUID is case-insensitive (RFC 9562) and
    /// PostgreSQL's `uuid` prints it lowercase: in that form it is kept lowercase, so that one id has one text.
    public init?(_ text: String) {
        guard (1...Self.maximumLength).contains(text.utf8.count), text.utf8.allSatisfy(Self.isIDByte) else {
            return nil
        }
        self.text = Self.lowercasedIfUUID(text)
    }

    /// A UUID the functions made (a record's id), in its lowercase text form.
    public init(_ uuid: UUID) {
        text = uuid.lowercasedText
    }

    public var description: String { text }
    public var postgresText: String { text }

    public init(postgresText: String) throws(PostgresError) {
        guard let id = AppID(postgresText) else {
            throw PostgresError(.decoding, serverMessage: "an id of the app's is not 1-100 id characters")
        }
        self = id
    }

    public static func < (lhs: AppID, rhs: AppID) -> Bool { lhs.text < rhs.text }

    /// `text` lower-cased when it is a UUID in its exact form (`UUID(exactly:)`: 8-4-4-4-12 hex digits), which is
    /// the form PostgreSQL prints; anything else as it is. Read as bytes, with no `UUID` made and printed again:
    /// every id of every request and row passes here.
    static func lowercasedIfUUID(_ text: String) -> String {
        var hasUpper = false
        var count = 0
        for byte in text.utf8 {
            switch count {
            case 8, 13, 18, 23:
                guard byte == UInt8(ascii: "-") else { return text }
            default:
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"): break
                case UInt8(ascii: "A")...UInt8(ascii: "F"): hasUpper = true
                default: return text
                }
            }
            count += 1
            guard count <= 36 else { return text }
        }
        guard count == 36, hasUpper else { return text }
        return String(
            decoding: text.utf8.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "F") ? $0 | 0x20 : $0 },
            as: UTF8.self)
    }

    private static func isIDByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."),
            UInt8(ascii: ":"):
            true
        default: false
        }
    }
}

extension FieldValidator {
    /// `patientId`: required for a caregiver, optional for a patient.
    mutating func patientID(for principal: Principal) -> AppID? {
        if case .caregiver = principal {
            return appID("patientId", required: true)
        }
        return appID("patientId", required: false)
    }
}

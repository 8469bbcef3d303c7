import Codecs
import Libpq
import FoundationEssentials

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
        self.text = UUID(exactly: text).map { $0.uuidString.lowercased() } ?? text
    }

    /// A UUID the functions made (a record's id), in its lowercase text form.
    public init(_ uuid: UUID) {
        text = uuid.uuidString.lowercased()
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

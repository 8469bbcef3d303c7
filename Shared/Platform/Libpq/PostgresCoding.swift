import Codecs
import FoundationEssentials

/// A Swift value that can be sent as a parameter in PostgreSQL's text format.
public protocol PostgresEncodable: Sendable {
    var postgresText: String { get }
}

/// A Swift value that can be read from a column in PostgreSQL's text format.
public protocol PostgresDecodable {
    /// - Throws: ``PostgresError`` with code `.decoding` when the text is not a value of this type.
    init(postgresText: String) throws(PostgresError)

    /// The value of a NULL column: an error, except for optionals.
    static func postgresNull() throws(PostgresError) -> Self
}

extension PostgresDecodable {
    public static func postgresNull() throws(PostgresError) -> Self {
        throw PostgresError(.decoding, serverMessage: "NULL where \(Self.self) was expected")
    }
}

extension String: PostgresEncodable, PostgresDecodable {
    public var postgresText: String { self }
    public init(postgresText: String) { self = postgresText }
}

extension Int: PostgresEncodable, PostgresDecodable {
    public var postgresText: String { String(self) }
    public init(postgresText: String) throws(PostgresError) {
        guard let value = Int(postgresText) else { throw .init(.decoding) }
        self = value
    }
}

extension Double: PostgresEncodable, PostgresDecodable {
    public var postgresText: String { String(self) }
    public init(postgresText: String) throws(PostgresError) {
        guard let value = Double(postgresText) else { throw .init(.decoding) }
        self = value
    }
}

extension Bool: PostgresEncodable, PostgresDecodable {
    public var postgresText: String { self ? "t" : "f" }
    public init(postgresText: String) throws(PostgresError) {
        switch postgresText {
        case "t", "true": self = true
        case "f", "false": self = false
        default: throw .init(.decoding)
        }
    }
}

extension UUID: PostgresEncodable, PostgresDecodable {
    public var postgresText: String { uuidString.lowercased() }
    public init(postgresText: String) throws(PostgresError) {
        guard let value = UUID(exactly: postgresText) else { throw .init(.decoding) }
        self = value
    }
}

/// `timestamptz`: sent as RFC 3339 in UTC with microseconds; read from PostgreSQL's ISO output with any offset
/// (`2026-02-11 07:30:00.123456+09`), so the session's TimeZone setting does not matter.
extension Date: PostgresEncodable, PostgresDecodable {
    public var postgresText: String { Timestamp.rfc3339UTC(self) }
    public init(postgresText: String) throws(PostgresError) {
        guard let value = Timestamp.parsePostgres(postgresText) else { throw .init(.decoding) }
        self = value
    }
}

/// `bytea`, in the hex text format (`\x0a1b…`).
public struct PostgresBytes: PostgresEncodable, PostgresDecodable, Equatable {
    public var bytes: [UInt8]
    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public var postgresText: String {
        "\\x" + Hex.encode(bytes)
    }

    public init(postgresText: String) throws(PostgresError) {
        guard postgresText.hasPrefix("\\x"), postgresText.utf8.count % 2 == 0 else { throw .init(.decoding) }
        var bytes: [UInt8] = []
        var iterator = postgresText.utf8.dropFirst(2).makeIterator()
        while let high = iterator.next(), let low = iterator.next() {
            guard let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16) else {
                throw .init(.decoding)
            }
            bytes.append(value)
        }
        self.bytes = bytes
    }
}

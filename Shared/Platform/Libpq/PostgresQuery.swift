import Codecs
/// A SQL command with its parameters kept apart from its text.
///
/// Built by string interpolation, every interpolated value becomes a `$n` placeholder and a bind, so a value can
/// never change the statement (after postgres-nio's `PostgresQuery`):
/// ```swift
/// let query: PostgresQuery = "SELECT id FROM push_devices WHERE owner_id = \(ownerID) AND token = \(token)"
/// ```
/// Text that is really SQL (a migration file) needs the explicitly named ``init(unsafeSQL:binds:)``.
public struct PostgresQuery: Sendable, ExpressibleByStringInterpolation {
    /// The statement with `$1`, `$2`, … placeholders.
    public private(set) var sql: String
    /// The parameters in text format; `nil` is SQL NULL.
    public private(set) var binds: [String?]

    /// A statement taken verbatim. Use only for trusted SQL written by us (migrations), never for input.
    public init(unsafeSQL sql: String, binds: [String?] = []) {
        self.sql = sql
        self.binds = binds
    }

    public init(stringLiteral value: String) {
        self.init(unsafeSQL: value)
    }

    public init(stringInterpolation: StringInterpolation) {
        self.init(unsafeSQL: stringInterpolation.sql, binds: stringInterpolation.binds)
    }

    public struct StringInterpolation: StringInterpolationProtocol {
        var sql = ""
        var binds: [String?] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            sql.reserveCapacity(literalCapacity + interpolationCount * 3)
            binds.reserveCapacity(interpolationCount)
        }

        public mutating func appendLiteral(_ literal: String) {
            sql += literal
        }

        /// Appends a placeholder and binds `value`.
        public mutating func appendInterpolation(_ value: some PostgresEncodable) {
            binds.append(value.postgresText)
            sql += "$\(binds.count)"
        }

        /// Appends a placeholder bound to `value`, or to NULL.
        public mutating func appendInterpolation(_ value: (some PostgresEncodable)?) {
            binds.append(value?.postgresText)
            sql += "$\(binds.count)"
        }
    }
}

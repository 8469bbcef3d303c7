import Codecs
/// The rows of a result, already copied out of libpq, in text format.
public struct PostgresRows: Sendable, RandomAccessCollection {
    public let columns: [String]
    let rows: [[String?]]
    /// The count from the command tag (`UPDATE 3` → 3).
    public let affectedRows: Int

    public var startIndex: Int { rows.startIndex }
    public var endIndex: Int { rows.endIndex }

    public subscript(position: Int) -> PostgresRow {
        PostgresRow(columns: columns, values: rows[position])
    }

    /// The only row, or `nil` when there is none.
    public var single: PostgresRow? { isEmpty ? nil : self[0] }

    /// The rows `isIncluded` keeps, as a result of the same columns (its count theirs): for a call that returns rows
    /// of two kinds.
    public func keeping(_ isIncluded: (PostgresRow) throws -> Bool) rethrows -> PostgresRows {
        let kept = try rows.filter { try isIncluded(PostgresRow(columns: columns, values: $0)) }
        return PostgresRows(columns: columns, rows: kept, affectedRows: kept.count)
    }
}

/// One row of a result.
public struct PostgresRow: Sendable {
    public let columns: [String]
    let values: [String?]

    /// Decodes the column at `index`.
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, at index: Int) throws(PostgresError) -> T {
        guard values.indices.contains(index) else {
            throw PostgresError(.decoding, serverMessage: "column \(index) is missing for \(T.self)")
        }
        guard let text = values[index] else { return try T.postgresNull() }
        return try T(postgresText: text)
    }

    /// Decodes the column at `index`, which may be NULL.
    public func decode<T: PostgresDecodable>(_ type: T?.Type, at index: Int) throws(PostgresError) -> T? {
        guard values.indices.contains(index) else {
            throw PostgresError(.decoding, serverMessage: "column \(index) is missing")
        }
        guard let text = values[index] else { return nil }
        return try T(postgresText: text)
    }

    /// Decodes the column named `column`.
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, column: String) throws(PostgresError) -> T {
        guard let index = columns.firstIndex(of: column) else {
            throw PostgresError(.decoding, serverMessage: "no column \(column)")
        }
        return try decode(T.self, at: index)
    }

    /// Decodes the column named `column`, which may be NULL.
    public func decode<T: PostgresDecodable>(_ type: T?.Type, column: String) throws(PostgresError) -> T? {
        guard let index = columns.firstIndex(of: column) else {
            throw PostgresError(.decoding, serverMessage: "no column \(column)")
        }
        return try decode(T?.self, at: index)
    }

    /// Decodes the leading columns as a tuple: `let (id, enabled) = try row.decode((UUID, Bool).self)`.
    public func decode<each T: PostgresDecodable>(_ types: (repeat each T).Type) throws(PostgresError) -> (
        repeat each T
    ) {
        var index = 0
        func next<V: PostgresDecodable>(_ type: V.Type) throws(PostgresError) -> V {
            defer { index += 1 }
            return try decode(V.self, at: index)
        }
        return (repeat try next((each T).self))
    }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public init(postgresText: String) throws(PostgresError) {
        self = .some(try Wrapped(postgresText: postgresText))
    }

    public static func postgresNull() -> Self { nil }
}

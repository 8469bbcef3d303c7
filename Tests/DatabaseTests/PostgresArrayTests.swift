@testable import CaregiverPush
import Foundation
import Libpq
import Testing
import TestSupport

/// The array literals the outcome recording binds (`unnest($ids::uuid[], $errors::text[], …)`), read back by the
/// real PostgreSQL: every value as it was, in order, `nil` as NULL and the word NULL as a word.
@Suite("PostgreSQL array literals of the outcome recording")
struct PostgresArrayTests {
    @Test("text values with quotes, backslashes, braces, commas, blanks, NULL and the word NULL come back as they were")
    func textRoundTrip() throws {
        let values: [String?] = [
            "503 UNAVAILABLE", nil, "NULL", "", " padded ", #"a "quoted" one"#, #"back\slash"#, "{braces},comma",
            "tab\tand\nnewline", "日本語", "projects/p/messages/0:1234%abc",
        ]
        let literal = PostgresArray.literal(values)
        let read = try TestDatabase.with { connection in
            try connection.query(
                "SELECT v, v IS NULL FROM unnest(\(literal)::text[]) WITH ORDINALITY AS a(v, n) ORDER BY n"
            ).map { row in (try row.decode(String?.self, at: 0), try row.decode(Bool.self, at: 1)) }
        }
        #expect(read.map(\.0) == values)
        #expect(read.map(\.1) == values.map { $0 == nil })
    }

    @Test("uuid and integer arrays, and the empty array")
    func typedRoundTrip() throws {
        let ids = [UUID(), UUID(), UUID()]
        let (uuids, numbers, empty) = try TestDatabase.with { connection in
            (
                try connection.query(
                    "SELECT unnest(\(PostgresArray.literal(ids.map { $0.uuidString.lowercased() }))::uuid[])"
                ).map { try $0.decode(UUID.self, at: 0) },
                try connection.query("SELECT unnest(\(PostgresArray.literal(["1", "-2", "30"]))::integer[])")
                    .map { try $0.decode(Int.self, at: 0) },
                try connection.query("SELECT cardinality(\(PostgresArray.literal([String]()))::text[])")[0]
                    .decode(Int.self, at: 0)
            )
        }
        #expect(uuids == ids)
        #expect(numbers == [1, -2, 30])
        #expect(empty == 0)
    }
}

@testable import Codecs
import Testing

@Suite("strict JSON parser")
struct JSONValueTests {
    @Test("parses every kind of value")
    func parsesValues() throws {
        let value = try JSONValue.parse(
            #" {"a": [1, -2.5e1, true, false, null], "b": {"c": "d\n\u00e9\ud83d\ude00"}} "#)
        #expect(value["a"] == .array([.number(1), .number(-25), .bool(true), .bool(false), .null]))
        #expect(value["b"]?["c"] == .string("d\né😀"))
    }

    @Test(
        "rejects what RFC 8259 does not allow",
        arguments: [
            "", "{", "[1,]", "{\"a\":1,}", "01", "1.", ".5", "+1", "NaN", "\"\\x\"", "\"\u{01}\"", "{a:1}", "'a'",
            "\"\\ud800\"", "\"\\udc00x\"", "[1] [2]", "tru", "1e", "-",
        ])
    func rejectsInvalid(text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(text) }
    }

    @Test("duplicate member names are an error, not last-one-wins")
    func duplicateMembers() {
        #expect(throws: JSONParseError(reason: .duplicateMember, offset: 9)) {
            try JSONValue.parse(#"{"a": 1, "a": 2}"#)
        }
    }

    /// A string's bytes as pieces: raw runs (well-formed UTF-8 or not) and escapes.
    enum Piece {
        case raw([UInt8])
        case escape(String, Unicode.Scalar)
    }

    /// Raw bytes that are often well-formed and often not: ASCII, multi-byte characters, lone continuation bytes,
    /// overlong forms, surrogates, values past U+10FFFF, truncated sequences, bytes UTF-8 never uses.
    static func rawRun(_ random: inout SeededGenerator) -> [UInt8] {
        let parts: [[UInt8]] = [
            Array("ab".utf8), Array("é".utf8), Array("薬".utf8), Array("😀".utf8), Array("\u{2028}".utf8), [0x7F],
            [0x80], [0xBF], [0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80],
            [0xF4, 0x90, 0x80, 0x80],
            [0xF0, 0x9F, 0x98], [0xE3, 0x81], [0xC3], [0xF8], [0xFF], [0xEF, 0xBB, 0xBF],
        ]
        return (0..<Int.random(in: 1...4, using: &random)).flatMap { _ in parts.randomElement(using: &random)! }
    }

    static let escapes: [(String, Unicode.Scalar)] = [
        (#"\n"#, "\n"), (#"\""#, "\""), (#"\\"#, "\\"), (#"\/"#, "/"), (#"\u00e9"#, "é"), (#"\u0000"#, "\u{0}"),
    ]

    /// What the pieces mean, each raw run decoded scalar by scalar on its own; `nil` when a run is not well-formed.
    static func meaning(_ pieces: [Piece]) -> [Unicode.Scalar]? {
        var scalars: [Unicode.Scalar] = []
        for piece in pieces {
            switch piece {
            case .escape(_, let scalar): scalars.append(scalar)
            case .raw(let bytes):
                var iterator = bytes.makeIterator()
                var decoder = UTF8()
                decoding: while true {
                    switch decoder.decode(&iterator) {
                    case .scalarValue(let scalar): scalars.append(scalar)
                    case .emptyInput: break decoding
                    case .error: return nil
                    }
                }
            }
        }
        return scalars
    }

    @Test(
        "a string's runs are read as a scalar-by-scalar UTF-8 decoding reads them", arguments: 0..<10 as Range<UInt64>)
    func stringRunsMatchScalarDecoding(seed: UInt64) throws {
        var random = SeededGenerator(state: seed)
        for _ in 0..<300 {
            let pieces: [Piece] = (0..<Int.random(in: 0...4, using: &random)).map { _ in
                if Bool.random(using: &random) { return .raw(Self.rawRun(&random)) }
                let (text, scalar) = Self.escapes.randomElement(using: &random)!
                return .escape(text, scalar)
            }
            var document: [UInt8] = [UInt8(ascii: "\"")]
            for piece in pieces {
                switch piece {
                case .raw(let bytes): document += bytes
                case .escape(let text, _): document += Array(text.utf8)
                }
            }
            document.append(UInt8(ascii: "\""))
            let parsed = try? JSONValue.parse(document).stringValue
            let expected = Self.meaning(pieces)
            #expect(parsed.map { Array($0.unicodeScalars) } == expected, "bytes \(document)")
        }
    }

    @Test("invalid UTF-8 inside a string is rejected")
    func invalidUTF8() {
        #expect(throws: JSONParseError.self) { try JSONValue.parse([0x22, 0xC3, 0x28, 0x22]) }
    }

    @Test("nesting deeper than the limit is rejected before it can exhaust the stack")
    func depthLimit() throws {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: JSONParseError.self) { try JSONValue.parse(deep) }
        let allowed = String(repeating: "[", count: 32) + String(repeating: "]", count: 32)
        #expect(try JSONValue.parse(allowed).arrayValue != nil)
    }

    @Test("integerValue accepts exact integers only")
    func integers() throws {
        #expect(try JSONValue.parse("3").integerValue == 3)
        #expect(try JSONValue.parse("3.0").integerValue == 3)
        #expect(try JSONValue.parse("3.5").integerValue == nil)
        #expect(try JSONValue.parse("\"3\"").integerValue == nil)
    }
}

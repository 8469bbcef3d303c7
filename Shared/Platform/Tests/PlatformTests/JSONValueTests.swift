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

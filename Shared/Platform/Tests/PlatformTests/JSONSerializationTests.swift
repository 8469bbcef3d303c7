@testable import Codecs
import FoundationEssentials
import Testing

/// A small seeded generator (SplitMix64), so that a failing tree can be made again from its seed.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("JSON written without the encoder")
struct JSONSerializationTests {
    /// What the project's encoder writes for `value`, or `nil` where it throws.
    static func encoderBytes(_ value: JSONValue) -> [UInt8]? {
        (try? JSONCoding.encoder().encode(value)).map(Array.init)
    }

    static let awkwardScalars: [Unicode.Scalar] = [
        "a", "Z", "_", "/", "\"", "\\", "\u{0}", "\u{1}", "\u{8}", "\u{9}", "\u{A}", "\u{C}", "\u{D}", "\u{1F}",
        "\u{7F}", "é", "\u{FF}", "\u{2028}", "\u{FEFF}", "日", "😀", " ", "0", "9",
    ]

    static func string(_ random: inout SeededGenerator) -> String {
        var text = ""
        for _ in 0..<Int.random(in: 0...8, using: &random) {
            text.unicodeScalars.append(awkwardScalars.randomElement(using: &random)!)
        }
        return text
    }

    static let awkwardNumbers: [Double] = [
        0, -0.0, 1, -1, 2.5, 0.1, 1e20, 1e-7, 1e21, 123_456.789, 9_007_199_254_740_992, 9_007_199_254_740_994,
        -9_007_199_254_740_992, .leastNonzeroMagnitude, 1.7976931348623157e308, 3.14159e300, 1_700_000_000_000,
    ]

    static func number(_ random: inout SeededGenerator) -> Double {
        switch Int.random(in: 0..<3, using: &random) {
        case 0: return awkwardNumbers.randomElement(using: &random)!
        case 1: return Double(Int64.random(in: -1_000_000...1_000_000, using: &random))
        default:
            while true {
                let value = Double(bitPattern: random.next())
                if value.isFinite { return value }
            }
        }
    }

    static func value(_ random: inout SeededGenerator, depth: Int) -> JSONValue {
        switch Int.random(in: 0..<(depth > 0 ? 6 : 4), using: &random) {
        case 0: return Bool.random(using: &random) ? .null : .bool(Bool.random(using: &random))
        case 1: return .number(number(&random))
        case 2, 3: return .string(string(&random))
        case 4:
            return .array((0..<Int.random(in: 0...4, using: &random)).map { _ in value(&random, depth: depth - 1) })
        default:
            var members: [String: JSONValue] = [:]
            for _ in 0..<Int.random(in: 0...5, using: &random) {
                members[string(&random)] = value(&random, depth: depth - 1)
            }
            return .object(members)
        }
    }

    @Test("every value is written byte for byte as the encoder writes it", arguments: 0..<20)
    func matchesTheEncoder(seed: UInt64) throws {
        var random = SeededGenerator(state: seed)
        for _ in 0..<200 {
            let value = Self.value(&random, depth: 4)
            let expected = try #require(Self.encoderBytes(value))
            #expect(value.serialized == expected, "seed \(seed): \(String(decoding: expected, as: UTF8.self))")
        }
    }

    @Test(
        "what the encoder refuses (a number that is not finite) is not written",
        arguments: [
            Double.nan, .infinity, -.infinity,
        ])
    func refusesWhatTheEncoderRefuses(number: Double) {
        let value = JSONValue.object(["a": .array([.string("x"), .number(number)])])
        #expect(Self.encoderBytes(value) == nil)
        #expect(value.serialized == nil)
        #expect(JSONCoding.encode(value) == nil)
    }

    @Test("JSONCoding writes a serializable value directly, anything else through the encoder")
    func codingTakesTheDirectPath() throws {
        // A value whose two paths differ tells them apart: its jsonValue says one thing, its Encodable another.
        struct Marked: JSONSerializable {
            var jsonValue: JSONValue { .string("direct") }
            func encode(to encoder: any Encoder) throws {
                var container = encoder.singleValueContainer()
                try container.encode("encoder")
            }
        }
        struct Plain: Encodable { let a = "b/c" }
        #expect(JSONCoding.string(Marked()) == #""direct""#)
        #expect(JSONCoding.string(Plain()) == #"{"a":"b/c"}"#)
    }
}

/// A value that can say what it is as a ``JSONValue``, so that ``JSONCoding/encode(_:)`` writes it directly instead of
/// through Foundation's `JSONEncoder`. The bytes are the same either way (`JSONSerializationTests` holds each
/// conforming type to it); the direct path is for what every invocation writes (its event, its response, its metrics
/// line), where the encoder's generic machinery cost more than the rest of the line's work.
public protocol JSONSerializable: Encodable {
    /// The value as JSON: exactly what its `Encodable` conformance encodes, an absent optional left out.
    var jsonValue: JSONValue { get }
}

extension JSONValue: JSONSerializable {
    public var jsonValue: JSONValue { self }
}

extension JSONValue {
    /// Compact JSON, byte for byte what ``JSONCoding/encoder(prettyPrinted:)`` writes for this value (members sorted
    /// by name, `/` not escaped, an integral number without a fraction); `nil` where that encoder throws (a number
    /// that is not finite).
    public var serialized: [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        return write(into: &out) ? out : nil
    }

    private func write(into out: inout [UInt8]) -> Bool {
        switch self {
        case .null: out += "null".utf8
        case .bool(let value): out += (value ? "true" : "false").utf8
        case .number(let value):
            guard value.isFinite else { return false }
            if let integer = integerValue {
                out += String(integer).utf8
            } else {
                // Swift's shortest round-trip form ("2.5", "1e-07", "1.2345678901234568e+17"), as the encoder's.
                out += value.description.utf8
            }
        case .string(let value): Self.writeString(value, into: &out)
        case .array(let values):
            out.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                guard value.write(into: &out) else { return false }
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            // The encoder's order: names compared byte by byte in UTF-8.
            for (index, key) in members.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }).enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                Self.writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                guard members[key, default: .null].write(into: &out) else { return false }
            }
            out.append(UInt8(ascii: "}"))
        }
        return true
    }

    /// A JSON string: `"` and `\` escaped, the control characters as `\b \f \n \r \t` or `\u00XX` (lower-case hex),
    /// everything else, `/` and non-ASCII included, as its UTF-8.
    private static func writeString(_ string: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most strings need no escape: their bytes go in at once.
        if !needsEscape(string) {
            out.append(contentsOf: string.utf8)
            out.append(UInt8(ascii: "\""))
            return
        }
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out += #"\""#.utf8
            case UInt8(ascii: "\\"): out += #"\\"#.utf8
            case 0x08: out += #"\b"#.utf8
            case 0x0C: out += #"\f"#.utf8
            case 0x0A: out += #"\n"#.utf8
            case 0x0D: out += #"\r"#.utf8
            case 0x09: out += #"\t"#.utf8
            case 0x00..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out += #"\u00"#.utf8
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0F)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Whether a byte of `string` must be escaped (read through its UTF-8 span: the view's own iteration cost more
    /// than the rest of an event's writing).
    private static func needsEscape(_ string: String) -> Bool {
        let bytes = string.utf8.span
        for index in bytes.indices {
            let byte = bytes[index]
            if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { return true }
        }
        return false
    }
}

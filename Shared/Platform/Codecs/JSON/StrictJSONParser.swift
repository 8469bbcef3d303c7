/// A recursive-descent RFC 8259 parser over a byte array. Internal: use ``JSONValue/parse(_:maxDepth:)``.
struct StrictJSONParser {
    private let bytes: [UInt8]
    private let maxDepth: Int
    private var index = 0
    private var depth = 0

    init(bytes: [UInt8], maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw fail(.trailingData) }
        return value
    }

    private func fail(_ reason: JSONParseError.Reason) -> JSONParseError {
        JSONParseError(reason: reason, offset: index)
    }

    private mutating func skipWhitespace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    private func peek() throws(JSONParseError) -> UInt8 {
        guard index < bytes.count else { throw fail(.unexpectedEnd) }
        return bytes[index]
    }

    private mutating func expect(_ literal: String) throws(JSONParseError) {
        for byte in literal.utf8 {
            guard index < bytes.count else { throw fail(.unexpectedEnd) }
            guard bytes[index] == byte else { throw fail(.unexpectedCharacter) }
            index += 1
        }
    }

    private mutating func parseValue() throws(JSONParseError) -> JSONValue {
        switch try peek() {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expect("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expect("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expect("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw fail(.unexpectedCharacter)
        }
    }

    private mutating func enter() throws(JSONParseError) {
        depth += 1
        guard depth <= maxDepth else { throw fail(.tooDeep) }
        index += 1
        skipWhitespace()
    }

    private mutating func parseObject() throws(JSONParseError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        var members: [String: JSONValue] = [:]
        if try peek() == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            guard try peek() == UInt8(ascii: "\"") else { throw fail(.unexpectedCharacter) }
            let nameOffset = index
            let name = try parseString()
            skipWhitespace()
            guard try peek() == UInt8(ascii: ":") else { throw fail(.unexpectedCharacter) }
            index += 1
            skipWhitespace()
            let value = try parseValue()
            guard members.updateValue(value, forKey: name) == nil else {
                throw JSONParseError(reason: .duplicateMember, offset: nameOffset)
            }
            skipWhitespace()
            switch try peek() {
            case UInt8(ascii: ","):
                index += 1
                skipWhitespace()
            case UInt8(ascii: "}"):
                index += 1
                return .object(members)
            default: throw fail(.unexpectedCharacter)
            }
        }
    }

    private mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        var elements: [JSONValue] = []
        if try peek() == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            elements.append(try parseValue())
            skipWhitespace()
            switch try peek() {
            case UInt8(ascii: ","):
                index += 1
                skipWhitespace()
            case UInt8(ascii: "]"):
                index += 1
                return .array(elements)
            default: throw fail(.unexpectedCharacter)
            }
        }
    }

    private mutating func parseNumber() throws(JSONParseError) -> Double {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        // int = zero / ( digit1-9 *DIGIT )
        guard index < bytes.count, isDigit(bytes[index]) else { throw fail(.invalidNumber) }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail(.invalidNumber) }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail(.invalidNumber) }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        guard let value = Double(text), value.isFinite else {
            index = start
            throw fail(.invalidNumber)
        }
        return value
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private mutating func parseString() throws(JSONParseError) -> String {
        index += 1  // opening quote
        var text = ""
        var runStart = index
        while true {
            guard index < bytes.count else { throw fail(.unexpectedEnd) }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                text += try run(from: runStart, to: index)
                index += 1
                return text
            }
            if byte == UInt8(ascii: "\\") {
                text += try run(from: runStart, to: index)
                text.unicodeScalars.append(try parseEscape())
                runStart = index
                continue
            }
            guard byte >= 0x20 else { throw fail(.unexpectedCharacter) }
            index += 1
        }
    }

    /// A run of raw (unescaped) bytes, validated as UTF-8 as a whole: the standard library's validation rejects what
    /// a scalar-by-scalar `UTF8` decoding does (overlong forms, surrogates, values past U+10FFFF, truncated
    /// sequences), and copies the run once.
    private func run(from start: Int, to end: Int) throws(JSONParseError) -> String {
        guard start < end else { return "" }
        guard let text = String(validating: bytes[start..<end], as: UTF8.self) else {
            throw JSONParseError(reason: .invalidUTF8, offset: start)
        }
        return text
    }

    private mutating func parseEscape() throws(JSONParseError) -> Unicode.Scalar {
        index += 1  // backslash
        let byte = try peek()
        index += 1
        switch byte {
        case UInt8(ascii: "\""): return "\""
        case UInt8(ascii: "\\"): return "\\"
        case UInt8(ascii: "/"): return "/"
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            let unit = try parseHex4()
            switch unit {
            case 0xD800...0xDBFF:
                guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                else { throw fail(.invalidEscape) }
                index += 2
                let low = try parseHex4()
                guard (0xDC00...0xDFFF).contains(low) else { throw fail(.invalidEscape) }
                let value = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                guard let scalar = Unicode.Scalar(value) else { throw fail(.invalidEscape) }
                return scalar
            case 0xDC00...0xDFFF:
                throw fail(.invalidEscape)
            default:
                guard let scalar = Unicode.Scalar(unit) else { throw fail(.invalidEscape) }
                return scalar
            }
        default:
            throw fail(.invalidEscape)
        }
    }

    private mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = try peek()
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw fail(.invalidEscape)
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }
}

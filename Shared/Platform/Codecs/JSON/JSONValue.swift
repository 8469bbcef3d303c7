/// A JSON document, parsed strictly.
///
/// Request bodies and JWT segments are parsed with ``JSONValue/parse(_:maxDepth:)`` rather than `JSONDecoder`
/// because the decoder silently accepts duplicate member names (keeping one of them), which lets two parsers
/// disagree about what a token or a body says. Here a duplicate name is an error, as is anything after the
/// document, invalid UTF-8, a lone surrogate escape, or nesting deeper than `maxDepth`.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// The members of an object, or `nil` for any other kind of value.
    public var objectValue: [String: JSONValue]? {
        if case .object(let members) = self { return members }
        return nil
    }

    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public var numberValue: Double? {
        if case .number(let value) = self { return value }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The number as an integer, when it is one exactly (`3`, `3.0`, `3e0`) and fits an `Int64`.
    public var integerValue: Int64? {
        guard case .number(let value) = self, value.rounded(.towardZero) == value,
            value >= -9_007_199_254_740_992, value <= 9_007_199_254_740_992
        else { return nil }
        return Int64(value)
    }

    /// A member of an object; `nil` when absent or when `self` is not an object.
    public subscript(member: String) -> JSONValue? {
        objectValue?[member]
    }

    /// A short name of the kind of value, for validation messages.
    public var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

/// Why a document was not accepted. The description names the byte offset, never the content.
public struct JSONParseError: Error, Equatable, CustomStringConvertible {
    public enum Reason: String, Sendable {
        case unexpectedEnd = "unexpected end of input"
        case unexpectedCharacter = "unexpected character"
        case invalidUTF8 = "invalid UTF-8"
        case invalidEscape = "invalid escape sequence"
        case invalidNumber = "invalid number"
        case duplicateMember = "duplicate member name"
        case tooDeep = "nesting too deep"
        case trailingData = "data after the document"
    }

    public let reason: Reason
    public let offset: Int

    public var description: String { "\(reason.rawValue) at byte \(offset)" }
}

extension JSONValue {
    /// Parses one JSON document (RFC 8259) from UTF-8 bytes.
    /// - Parameters:
    ///   - bytes: the whole document; leading and trailing white space is allowed.
    ///   - maxDepth: how many arrays and objects may nest; deeper input is rejected before it can exhaust the stack.
    /// - Throws: ``JSONParseError`` for anything that is not exactly one well-formed document.
    public static func parse(_ bytes: some Collection<UInt8>, maxDepth: Int = 32) throws(JSONParseError) -> JSONValue {
        var parser = StrictJSONParser(bytes: Array(bytes), maxDepth: maxDepth)
        return try parser.parseDocument()
    }

    /// Parses one JSON document from a string.
    public static func parse(_ text: String, maxDepth: Int = 32) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8), maxDepth: maxDepth)
    }
}

extension JSONValue: Encodable {
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value):
            if let integer = integerValue { try container.encode(integer) } else { try container.encode(value) }
        case .string(let value): try container.encode(value)
        case .array(let values): try container.encode(values)
        case .object(let members): try container.encode(members)
        }
    }
}

extension String {
    /// The string with `pad` in front up to `length` characters (dates, times, `\u` escapes).
    public func leftPadded(to length: Int, with pad: Character = "0") -> String {
        count >= length ? self : String(repeating: pad, count: length - count) + self
    }
}

extension Int {
    /// The decimal integer `text` is (`Int(_:)`'s grammar: an optional sign, then digits) when it lies in `range`;
    /// `nil` otherwise. The one parser of the bounded numbers in environment variables and configuration.
    public init?(_ text: String, in range: ClosedRange<Int>) {
        guard let value = Int(text), range.contains(value) else { return nil }
        self = value
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs (HTTP's optional whitespace, RFC 9110 §5.6.3), which is
    /// what `trimmingCharacters(in: .whitespaces)` was used for before FoundationEssentials.
    public func trimmingOptionalWhitespace() -> String {
        // Most text has nothing to trim (a header value libcurl or the HTTP parser trimmed already): a space or a tab
        // character is its one byte, so text that neither starts nor ends with one of those bytes is returned whole,
        // without walking its characters.
        let text = String(self)
        let isSpaceByte = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        if let head = text.utf8.first, let tail = text.utf8.last, !isSpaceByte(head), !isSpaceByte(tail) { return text }
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = text.firstIndex(where: { !isSpace($0) }), let last = text.lastIndex(where: { !isSpace($0) })
        else {
            return ""
        }
        return String(text[first...last])
    }
}

extension String {
    /// Whether every byte is in the given ASCII set (a cheap allow-list check before anything else looks at input).
    public func consists(of allowed: (UInt8) -> Bool) -> Bool {
        utf8.allSatisfy(allowed)
    }

    /// The text without leading and trailing whitespace and line breaks (environment variables pasted with a
    /// trailing newline).
    public func trimmingWhitespaceAndNewlines() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
            let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
        else { return "" }
        return String(scalars[first...last])
    }
}

extension Duration {
    /// Whole milliseconds, rounded up so that a positive wait never becomes zero.
    public var milliseconds: Int {
        let (seconds, attoseconds) = components
        return Int(seconds) * 1000 + Int((attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }
}

extension String {
    /// The text with every byte outside RFC 3986's unreserved set percent-encoded, so that it is one path segment or
    /// one query value whatever it holds (a request id must not be able to change a path; an ARN holds `:` and `/`).
    public var percentEncoded: String {
        var out = ""
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + Hex.encode([byte]).uppercased()
            }
        }
        return out
    }
}

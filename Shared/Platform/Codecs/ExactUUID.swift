import FoundationEssentials

extension UUID {
    /// A UUID from exactly its 36-character text form: 8-4-4-4-12 hexadecimal digits (either case) and four hyphens,
    /// nothing before, after or in between.
    ///
    /// `UUID(uuidString:)` hands the string to C, which stops at the first NUL: `"<uuid>\u{0}x"` parsed as `<uuid>`,
    /// so a token's `sub`, a body's `patientId` or an `Idempotency-Key` with a NUL suffix passed as the identifier
    /// before it. Every identifier read from a request goes through this instead.
    public init?(exactly text: String) {
        var count = 0
        for byte in text.utf8 {
            let valid: Bool
            switch count {
            case 8, 13, 18, 23: valid = byte == UInt8(ascii: "-")
            default: valid = byte.isHexDigit
            }
            guard valid, count < 36 else { return nil }
            count += 1
        }
        guard count == 36 else { return nil }
        self.init(uuidString: text)
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
            UInt8(ascii: "A")...UInt8(ascii: "F"):
            true
        default: false
        }
    }
}

import FoundationEssentials

extension UUID {
    /// A UUID from exactly its 36-character text form: 8-4-4-4-12 hexadecimal digits (either case) and four hyphens,
    /// nothing before, after or in between.
    ///
    /// `UUID(uuidString:)` hands the string to C, which stops at the first NUL: `"<uuid>\u{0}x"` parsed as `<uuid>`,
    /// so a token's `sub`, a body's `patientId` or an `Idempotency-Key` with a NUL suffix passed as the identifier
    /// before it. Every identifier read from a request goes through this instead.
    ///
    /// The bytes are read here too, not by `UUID(uuidString:)`: that parser is C's `sscanf`, which showed in the
    /// functions' profile under load for every id a recording decodes.
    public init?(exactly text: String) {
        var bytes = [UInt8](repeating: 0, count: 16)
        var count = 0
        var nibbles = 0
        for byte in text.utf8 {
            guard count < 36 else { return nil }
            switch count {
            case 8, 13, 18, 23:
                guard byte == UInt8(ascii: "-") else { return nil }
            default:
                guard let value = byte.hexValue else { return nil }
                bytes[nibbles / 2] |= nibbles % 2 == 0 ? value << 4 : value
                nibbles += 1
            }
            count += 1
        }
        guard count == 36 else { return nil }
        self.init(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
                bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }
}

extension UInt8 {
    /// The value of a hexadecimal digit (either case), or `nil`.
    fileprivate var hexValue: UInt8? {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): self - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): self - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): self - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

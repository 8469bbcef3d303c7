import FoundationEssentials

extension UUID {
    /// A random UUID (version 4, RFC 9562 §5.4) from the standard library's system generator — `getrandom(2)` on
    /// Linux, one call per eight bytes.
    ///
    /// `UUID()` opens, reads and closes `/dev/urandom` for each one, which showed in the gateway's profile under
    /// load (a request id and an invocation id per request, 2.4% of its CPU). The same randomness, without a file
    /// opened per id.
    public static func random() -> UUID {
        var generator = SystemRandomNumberGenerator()
        return random(high: generator.next(), low: generator.next())
    }

    /// The version 4 UUID whose 122 random bits come from `high` and `low` (its version and variant bits set).
    package static func random(high: UInt64, low: UInt64) -> UUID {
        let high = high & 0xFFFF_FFFF_FFFF_0FFF | 0x0000_0000_0000_4000
        let low = low & 0x3FFF_FFFF_FFFF_FFFF | 0x8000_0000_0000_0000
        func byte(_ word: UInt64, _ index: Int) -> UInt8 { UInt8(truncatingIfNeeded: word >> (56 - 8 * index)) }
        return UUID(
            uuid: (
                byte(high, 0), byte(high, 1), byte(high, 2), byte(high, 3), byte(high, 4), byte(high, 5),
                byte(high, 6), byte(high, 7), byte(low, 0), byte(low, 1), byte(low, 2), byte(low, 3), byte(low, 4),
                byte(low, 5), byte(low, 6), byte(low, 7)
            ))
    }

    /// The 36-character text in lower case, as PostgreSQL prints a `uuid`: `uuidString.lowercased()` without C's
    /// `snprintf` and a second string.
    public var lowercasedText: String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(36)
        let u = uuid
        let bytes = [u.0, u.1, u.2, u.3, u.4, u.5, u.6, u.7, u.8, u.9, u.10, u.11, u.12, u.13, u.14, u.15]
        for (index, byte) in bytes.enumerated() {
            if index == 4 || index == 6 || index == 8 || index == 10 { text.append(UInt8(ascii: "-")) }
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}

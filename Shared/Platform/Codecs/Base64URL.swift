/// Base64url without padding (RFC 4648 §5, RFC 7515 §2), the encoding of JWS segments and JWK members.
///
/// Decoding is strict so that one token has exactly one spelling: only `A–Z a–z 0–9 - _`, no padding, no white
/// space, no impossible length, and the unused low bits of the last character must be zero. Lenient decoders
/// accept several strings for the same bytes, which lets a modified token pass as "the same" token.
public enum Base64URL {
    /// Encodes `bytes` without `=` padding.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        Base64Codec.url.encode(Array(bytes), padded: false)
    }

    /// Decodes unpadded base64url.
    /// - Returns: the bytes, or `nil` for any character outside the alphabet, any `=`, a length of 4n+1, or
    ///   non-zero trailing bits. The empty string decodes to no bytes.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        Base64Codec.url.decodeUnpadded(Array(text.utf8))
    }
}

/// Standard base64 with padding (RFC 4648 §4), decoded as strictly as ``Base64URL``.
public enum Base64 {
    /// Encodes `bytes` with `=` padding to a multiple of four characters.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        Base64Codec.standard.encode(Array(bytes), padded: true)
    }

    /// Decodes padded standard base64.
    /// - Returns: the bytes, or `nil` unless the text is a multiple of four characters from `A–Z a–z 0–9 + /`
    ///   with exactly the padding its length needs and zero trailing bits. No white space or line breaks.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var characters = Array(text.utf8)
        guard characters.count % 4 == 0 else { return nil }
        var padding = 0
        while padding < 2, characters.last == UInt8(ascii: "=") {
            characters.removeLast()
            padding += 1
        }
        // With the total a multiple of four, the codec's own length rule (no 4n+1) and "no `=` left" make the
        // padding count the only one possible for this length.
        return Base64Codec.standard.decodeUnpadded(characters)
    }
}

/// The shared table-driven codec behind ``Base64URL`` and ``Base64``.
struct Base64Codec: Sendable {
    static let url = Base64Codec(alphabet: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    static let standard = Base64Codec(alphabet: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")

    private static let invalid: UInt8 = 0xFF
    private let alphabet: [UInt8]
    /// Character byte → 6-bit value, or ``invalid``.
    private let values: [UInt8]

    private init(alphabet: String) {
        self.alphabet = Array(alphabet.utf8)
        var values = [UInt8](repeating: Self.invalid, count: 256)
        for (index, character) in self.alphabet.enumerated() { values[Int(character)] = UInt8(index) }
        self.values = values
    }

    func encode(_ bytes: [UInt8], padded: Bool) -> String {
        var output = [UInt8]()
        output.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index + 3 <= bytes.count {
            let group = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            appendCharacters(of: group, count: 4, to: &output)
            index += 3
        }
        switch bytes.count - index {
        case 1:
            appendCharacters(of: UInt32(bytes[index]) << 16, count: 2, to: &output)
            if padded { output.append(contentsOf: Array("==".utf8)) }
        case 2:
            appendCharacters(of: UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8, count: 3, to: &output)
            if padded { output.append(UInt8(ascii: "=")) }
        default:
            break
        }
        return String(decoding: output, as: UTF8.self)
    }

    private func appendCharacters(of group: UInt32, count: Int, to output: inout [UInt8]) {
        for position in 0..<count {
            output.append(alphabet[Int((group >> UInt32(18 - 6 * position)) & 0x3F)])
        }
    }

    /// Decodes characters without padding; `nil` on any invalid character, a 4n+1 length or non-zero trailing bits.
    func decodeUnpadded(_ characters: [UInt8]) -> [UInt8]? {
        guard characters.count % 4 != 1 else { return nil }
        var output = [UInt8]()
        output.reserveCapacity(characters.count * 3 / 4)
        var group: UInt32 = 0
        var filled = 0
        for character in characters {
            let value = values[Int(character)]
            guard value != Self.invalid else { return nil }
            group = group << 6 | UInt32(value)
            filled += 1
            if filled == 4 {
                output.append(UInt8(truncatingIfNeeded: group >> 16))
                output.append(UInt8(truncatingIfNeeded: group >> 8))
                output.append(UInt8(truncatingIfNeeded: group))
                group = 0
                filled = 0
            }
        }
        switch filled {
        case 2:  // 12 bits carry one byte; the low 4 must be zero
            guard group & 0x0F == 0 else { return nil }
            output.append(UInt8(truncatingIfNeeded: group >> 4))
        case 3:  // 18 bits carry two bytes; the low 2 must be zero
            guard group & 0x03 == 0 else { return nil }
            output.append(UInt8(truncatingIfNeeded: group >> 10))
            output.append(UInt8(truncatingIfNeeded: group >> 2))
        default:
            break
        }
        return output
    }
}

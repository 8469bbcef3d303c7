import Foundation
import HTTPTypes

/// An IP address as its bytes: 4 for IPv4, 16 for IPv6 (an IPv4-mapped IPv6 address is its IPv4 address, so that a
/// dual-stack listener's `::ffff:127.0.0.1` is `127.0.0.1`).
package struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    package let bytes: [UInt8]

    /// Parses `192.0.2.1`, `2001:db8::1`, `::ffff:192.0.2.1`, and those with a port (`192.0.2.1:443`,
    /// `[2001:db8::1]:443`) as proxies write them into forwarding headers; `nil` for anything else.
    ///
    /// Read as bytes, once per request and entry on the gateway's hot path: no characters, no intermediate strings.
    package init?(_ text: some StringProtocol) {
        guard let bytes = Array(text.utf8).withUnsafeBufferPointer({ Self.parse($0[...]) }) else { return nil }
        self.bytes = bytes
    }

    package var description: String {
        var text = ""
        if bytes.count == 4 {
            text.reserveCapacity(15)
            for (index, byte) in bytes.enumerated() {
                if index > 0 { text.append(".") }
                text += String(byte)
            }
            return text
        }
        text.reserveCapacity(39)
        for index in stride(from: 0, to: 16, by: 2) {
            if index > 0 { text.append(":") }
            text += String(UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1]), radix: 16)
        }
        return text
    }

    private typealias Bytes = Slice<UnsafeBufferPointer<UInt8>>

    /// The address's bytes, an IPv4-mapped IPv6 address as its IPv4 bytes, after taking off a port (`[…]:port`, or
    /// `…:port` when there is exactly one colon).
    private static func parse(_ text: Bytes) -> [UInt8]? {
        var text = text
        let colon = UInt8(ascii: ":")
        if text.first == UInt8(ascii: "[") {
            guard let close = text.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            let rest = text[(close + 1)...]
            guard rest.isEmpty || (rest.first == colon && rest.dropFirst().allSatisfy(isDigit)) else { return nil }
            text = text[(text.startIndex + 1)..<close]
        } else if let first = text.firstIndex(of: colon), !text[(first + 1)...].contains(colon),
            text[(first + 1)...].allSatisfy(isDigit)
        {
            text = text[..<first]
        }
        if let v4 = parseIPv4(text) { return v4 }
        guard let v6 = parseIPv6(text) else { return nil }
        let mapped = v6.prefix(10).allSatisfy { $0 == 0 } && v6[10] == 0xff && v6[11] == 0xff
        return mapped ? Array(v6.suffix(4)) : v6
    }

    static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private static func hexValue(_ byte: UInt8) -> UInt16? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt16(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt16(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt16(byte - UInt8(ascii: "A") + 10)
        default: nil
        }
    }

    /// Four dot-separated decimal parts of one to three digits, each at most 255.
    private static func parseIPv4(_ text: Bytes) -> [UInt8]? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(4)
        var value = 0
        var digits = 0
        for byte in text {
            if byte == UInt8(ascii: ".") {
                guard digits > 0, bytes.count < 3 else { return nil }
                bytes.append(UInt8(value))
                value = 0
                digits = 0
            } else {
                guard isDigit(byte), digits < 3 else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
                digits += 1
                guard value <= 255 else { return nil }
            }
        }
        guard digits > 0, bytes.count == 3 else { return nil }
        bytes.append(UInt8(value))
        return bytes
    }

    /// Colon-separated groups of one to four hex digits, at most one `::`, the last group of a half possibly an
    /// IPv4 address.
    private static func parseIPv6(_ text: Bytes) -> [UInt8]? {
        let colon = UInt8(ascii: ":")
        guard text.contains(colon), text.count <= 45 else { return nil }
        var head = text
        var tail: Bytes?
        var index = text.startIndex
        while index + 1 < text.endIndex {
            if text[index] == colon && text[index + 1] == colon {
                guard tail == nil else { return nil }
                head = text[text.startIndex..<index]
                tail = text[(index + 2)...]
                index += 2
                continue
            }
            index += 1
        }
        func groups(_ part: Bytes) -> [UInt8]? {
            if part.isEmpty { return [] }
            var bytes: [UInt8] = []
            let pieces = part.split(separator: colon, omittingEmptySubsequences: false)
            for (index, piece) in pieces.enumerated() {
                if index == pieces.count - 1, piece.contains(UInt8(ascii: ".")), let v4 = parseIPv4(piece) {
                    bytes += v4
                } else {
                    guard (1...4).contains(piece.count) else { return nil }
                    var value: UInt16 = 0
                    for byte in piece {
                        guard let digit = hexValue(byte) else { return nil }
                        value = value << 4 | digit
                    }
                    bytes += [UInt8(value >> 8), UInt8(value & 0xff)]
                }
            }
            return bytes
        }
        guard let headBytes = groups(head) else { return nil }
        guard let tail else { return headBytes.count == 16 ? headBytes : nil }
        guard let tailBytes = groups(tail), headBytes.count + tailBytes.count <= 14 else { return nil }
        return headBytes + Array(repeating: 0, count: 16 - headBytes.count - tailBytes.count) + tailBytes
    }
}

/// A block of addresses in CIDR notation (`10.0.0.0/8`, `::1/128`; a bare address is the block of that address).
package struct AddressBlock: Hashable, Sendable, CustomStringConvertible {
    package let network: IPAddress
    package let prefixLength: Int

    package init?(_ text: some StringProtocol) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let address = IPAddress(parts[0]) else { return nil }
        let bits = address.bytes.count * 8
        if parts.count == 2 {
            guard (1...3).contains(parts[1].count), parts[1].utf8.allSatisfy(IPAddress.isDigit),
                let length = Int(parts[1]),
                length <= bits
            else { return nil }
            prefixLength = length
        } else {
            prefixLength = bits
        }
        network = address
    }

    package func contains(_ address: IPAddress) -> Bool {
        guard address.bytes.count == network.bytes.count else { return false }
        var left = prefixLength
        for (mine, theirs) in zip(network.bytes, address.bytes) where left > 0 {
            let mask: UInt8 = left >= 8 ? 0xff : ~(0xff >> UInt8(left))
            guard mine & mask == theirs & mask else { return false }
            left -= 8
        }
        return true
    }

    package var description: String { "\(network)/\(prefixLength)" }
}

/// Who a request comes from: the connection's address, unless that is one of the proxies the gateway was told to
/// trust and the header those proxies append to is configured. Then the header's values, all its lines joined in
/// order, are read from the right: the client is the address `hops` entries from the right (each proxy in the chain
/// appends one), or, without `hops`, the first address that is not itself a trusted proxy. Whatever a client writes
/// into the header itself lies to the left of what the proxies appended, so it names no one.
package struct ClientAddressRule: Sendable {
    /// The header the proxies append the address they were reached from to (`x-forwarded-for`).
    package var header: String
    /// The proxies whose header is honoured, and which are skipped when reading it from the right.
    package var trustedProxies: [AddressBlock]
    /// How many entries from the right the client is (1: the last); `nil`: the first untrusted entry.
    package var hops: Int?

    package init(header: String, trustedProxies: [AddressBlock], hops: Int? = nil) {
        self.header = header.lowercased()
        self.trustedProxies = trustedProxies
        self.hops = hops
    }

    /// The client of a request with these header lines (each line's value, in order) over a connection from
    /// `peer`.
    package func client(headerLines: [String], peer: String?) -> String {
        guard let peer else { return "unknown" }
        guard let peerAddress = IPAddress(peer), isTrusted(peerAddress) else { return peer }
        let entries = headerLines.flatMap { $0.utf8.split(separator: UInt8(ascii: ",")) }.compactMap(Self.trimmed)
        guard !entries.isEmpty else { return peer }
        if let hops {
            // Fewer entries than proxies: the chain is not the one configured, so the nearest proxy is all we know.
            guard entries.count >= hops else { return peer }
            return Self.key(entries[entries.count - hops], IPAddress(entries[entries.count - hops]))
        }
        for entry in entries.reversed() {
            let address = IPAddress(entry)
            guard let address, isTrusted(address) else { return Self.key(entry, address) }
        }
        // Every entry a trusted proxy: the request started inside; its first hop is the client.
        return Self.key(entries[0], IPAddress(entries[0]))
    }

    private func isTrusted(_ address: IPAddress) -> Bool {
        trustedProxies.contains { $0.contains(address) }
    }

    /// An address as its canonical text (a port dropped); anything else as written, bounded.
    private static func key(_ entry: Substring, _ address: IPAddress?) -> String {
        address?.description ?? String(entry.prefix(64))
    }

    /// An entry without its surrounding spaces and tabs; `nil` when nothing else is left.
    private static func trimmed(_ entry: Substring.UTF8View.SubSequence) -> Substring? {
        let blank = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        guard let first = entry.firstIndex(where: { !blank($0) }), let last = entry.lastIndex(where: { !blank($0) })
        else { return nil }
        return Substring(entry[first...last])
    }
}

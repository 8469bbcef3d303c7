import Foundation
import HTTPTypes

/// An IP address as its bytes: 4 for IPv4, 16 for IPv6 (an IPv4-mapped IPv6 address is its IPv4 address, so that a
/// dual-stack listener's `::ffff:127.0.0.1` is `127.0.0.1`).
package struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    package let bytes: [UInt8]

    /// Parses `192.0.2.1`, `2001:db8::1`, `::ffff:192.0.2.1`, and those with a port (`192.0.2.1:443`,
    /// `[2001:db8::1]:443`) as proxies write them into forwarding headers; `nil` for anything else.
    package init?(_ text: some StringProtocol) {
        var text = Substring(text)
        if text.first == "[" {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let rest = text[text.index(after: close)...]
            guard rest.isEmpty || (rest.first == ":" && rest.dropFirst().allSatisfy(\.isASCIIDigit)) else { return nil }
            text = text[text.index(after: text.startIndex)..<close]
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":"),
            text[text.index(after: colon)...].allSatisfy(\.isASCIIDigit)
        {
            text = text[..<colon]
        }
        if let v4 = Self.parseIPv4(text) {
            bytes = v4
        } else if let v6 = Self.parseIPv6(text) {
            let mapped = v6.prefix(10).allSatisfy { $0 == 0 } && v6[10] == 0xff && v6[11] == 0xff
            bytes = mapped ? Array(v6.suffix(4)) : v6
        } else {
            return nil
        }
    }

    package var description: String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        return stride(from: 0, to: 16, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
            .joined(separator: ":")
    }

    private static func parseIPv4(_ text: Substring) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var bytes: [UInt8] = []
        for part in parts {
            guard (1...3).contains(part.count), part.allSatisfy(\.isASCIIDigit), let value = UInt8(part) else {
                return nil
            }
            bytes.append(value)
        }
        return bytes
    }

    private static func parseIPv6(_ text: Substring) -> [UInt8]? {
        guard text.contains(":"), text.count <= 45 else { return nil }
        let halves = text.components(separatedBy: "::")
        guard halves.count <= 2 else { return nil }
        func groups(_ part: String) -> [UInt8]? {
            if part.isEmpty { return [] }
            var bytes: [UInt8] = []
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            for (index, piece) in pieces.enumerated() {
                if index == pieces.count - 1, piece.contains("."), let v4 = parseIPv4(piece) {
                    bytes += v4
                } else {
                    guard (1...4).contains(piece.count), let value = UInt16(piece, radix: 16) else { return nil }
                    bytes += [UInt8(value >> 8), UInt8(value & 0xff)]
                }
            }
            return bytes
        }
        guard let head = groups(halves[0]) else { return nil }
        if halves.count == 1 { return head.count == 16 ? head : nil }
        guard let tail = groups(halves[1]), head.count + tail.count <= 14 else { return nil }
        return head + Array(repeating: 0, count: 16 - head.count - tail.count) + tail
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
            guard (1...3).contains(parts[1].count), parts[1].allSatisfy(\.isASCIIDigit), let length = Int(parts[1]),
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
        let entries = headerLines.flatMap { $0.split(separator: ",") }.map(\.trimmingOptionalSpaces).filter {
            !$0.isEmpty
        }
        guard !entries.isEmpty else { return peer }
        if let hops {
            // Fewer entries than proxies: the chain is not the one configured, so the nearest proxy is all we know.
            guard entries.count >= hops else { return peer }
            return Self.key(entries[entries.count - hops])
        }
        for entry in entries.reversed() {
            guard let address = IPAddress(entry), isTrusted(address) else { return Self.key(entry) }
        }
        // Every entry a trusted proxy: the request started inside; its first hop is the client.
        return Self.key(entries[0])
    }

    private func isTrusted(_ address: IPAddress) -> Bool {
        trustedProxies.contains { $0.contains(address) }
    }

    /// An address as its canonical text (a port dropped); anything else as written, bounded.
    private static func key(_ entry: String) -> String {
        IPAddress(entry)?.description ?? String(entry.prefix(64))
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}

extension StringProtocol {
    fileprivate var trimmingOptionalSpaces: String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}

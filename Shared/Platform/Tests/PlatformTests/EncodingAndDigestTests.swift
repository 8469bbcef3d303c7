@testable import Codecs
@testable import OpenSSLCrypto
import Foundation
import Testing

@Suite("base64url and base64")
struct Base64Tests {
    @Test("base64url round-trips every length from 0 to 64 bytes")
    func roundTrip() throws {
        for length in 0...64 {
            let bytes = try SecureRandom.bytes(length)
            let text = Base64URL.encode(bytes)
            #expect(!text.contains("="))
            #expect(Base64URL.decode(text) == bytes)
        }
    }

    @Test("base64url uses - and _ and no padding")
    func knownVector() {
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
        #expect(Base64URL.encode(Array("any carnal pleas".utf8)) == "YW55IGNhcm5hbCBwbGVhcw")
        #expect(Base64URL.decode("-_8") == [0xFB, 0xFF])
        #expect(Base64URL.decode("") == [])
    }

    @Test(
        "base64url decoding rejects anything but the one canonical spelling",
        arguments: ["+_8", "-/8", "-_8=", "YW55IGNhcm5hbCBwbGVhcw==", "A", "ABCDE", "AB", "AAB", "YW55 IGNh", "YW\n55"])
    func strictness(text: String) {
        #expect(Base64URL.decode(text) == nil)
    }

    @Test("standard base64 requires exact padding and zero trailing bits")
    func standardStrictness() {
        #expect(Base64.encode([0xFB, 0xFF]) == "+/8=")
        #expect(Base64.decode("+/8=") == [0xFB, 0xFF])
        #expect(Base64.decode("YQ==") == Array("a".utf8))
        #expect(Base64.decode("YWJj") == Array("abc".utf8))
        #expect(Base64.decode("+/8") == nil)
        #expect(Base64.decode("YR==") == nil)
        #expect(Base64.decode("Y===") == nil)
        #expect(Base64.decode("YQ=a") == nil)
        #expect(Base64.decode("-_8=") == nil)
    }
}

@Suite("digests, MACs, comparison and randomness")
struct DigestTests {
    @Test("SHA-256 of \"abc\" matches the FIPS 180-2 vector")
    func sha256Vector() {
        #expect(
            Hex.encode(SHA256.hash(Array("abc".utf8)))
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            Hex.encode(SHA256.hash([UInt8]()))
                == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test("hexPrefix is the start of the lower-case hex digest")
    func hexPrefix() {
        #expect(SHA256.hexPrefix(of: "abc") == "ba7816bf8f01")
        #expect(SHA256.hexPrefix(of: "abc", length: 4) == "ba78")
        #expect(SHA256.hexPrefix(of: "abc", length: 100).count == 64)
    }

    @Test("HMAC-SHA-256 matches RFC 4231 test case 2")
    func hmacVector() {
        let code = HMACSHA256.authenticationCode(
            key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
        #expect(Hex.encode(code) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    /// RFC 4231 §4.2–4.8: key, data and HMAC-SHA-256 in hex (case 5's code is truncated to 128 bits; cases 6 and 7
    /// have a 131-byte key, longer than the block, which is hashed first).
    static let rfc4231: [(case: Int, key: String, data: String, code: String)] = [
        (
            1, String(repeating: "0b", count: 20), "4869205468657265",
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        ),
        (
            2, "4a656665", "7768617420646f2079612077616e7420666f72206e6f7468696e673f",
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        ),
        (
            3, String(repeating: "aa", count: 20), String(repeating: "dd", count: 50),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"
        ),
        (
            4, "0102030405060708090a0b0c0d0e0f10111213141516171819", String(repeating: "cd", count: 50),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"
        ),
        (
            5, String(repeating: "0c", count: 20), "546573742057697468205472756e636174696f6e",
            "a3b6167473100ee06e0c796c2955552b"
        ),
        (
            6, String(repeating: "aa", count: 131),
            "54657374205573696e67204c6172676572205468616e20426c6f636b2d53697a65204b6579202d2048617368204b6579204669"
                + "727374",
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        ),
        (
            7, String(repeating: "aa", count: 131),
            "5468697320697320612074657374207573696e672061206c6172676572207468616e20626c6f636b2d73697a65206b657920"
                + "616e642061206c6172676572207468616e20626c6f636b2d73697a6520646174612e20546865206b6579206e6565647320"
                + "746f20626520686173686564206265666f7265206265696e6720757365642062792074686520484d414320616c676f7269"
                + "74686d2e",
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"
        ),
    ]

    /// The bytes of lower-case hex text; nil when it is not hex.
    static func bytes(hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count.isMultiple(of: 2) else { return nil }
        return stride(from: 0, to: digits.count, by: 2).compactMap { index in
            UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16)
        }
    }

    @Test("HMAC-SHA-256 matches the RFC 4231 known answers (test cases 1 to 7)", arguments: rfc4231)
    func hmacRFC4231(vector: (case: Int, key: String, data: String, code: String)) throws {
        let key = try #require(Self.bytes(hex: vector.key))
        let data = try #require(Self.bytes(hex: vector.data))
        let code = HMACSHA256.authenticationCode(key: key, message: data)
        #expect(code.count == HMACSHA256.codeLength)
        #expect(Hex.encode(code).hasPrefix(vector.code), "RFC 4231 test case \(vector.case)")
    }

    @Test("SHA-256 of a message longer than one block matches the FIPS 180-2 vector")
    func sha256TwoBlocks() {
        #expect(
            Hex.encode(SHA256.hash(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    @Test("HMAC-SHA-256 with an empty key matches the known value")
    func hmacEmptyKey() {
        #expect(
            Hex.encode(HMACSHA256.authenticationCode(key: [], message: []))
                == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
    }

    @Test("constantTimeEquals is true only for equal bytes of equal length")
    func constantTime() {
        #expect(constantTimeEquals([1, 2, 3], [1, 2, 3]))
        #expect(constantTimeEquals([], []))
        #expect(!constantTimeEquals([1, 2, 3], [1, 2, 4]))
        #expect(!constantTimeEquals([1, 2, 3], [0, 2, 3]))
        #expect(!constantTimeEquals([1, 2, 3], [1, 2]))
        #expect(!constantTimeEquals([], [0]))
    }

    @Test("SecureRandom returns the requested count of differing bytes and refuses a negative count")
    func randomBytes() throws {
        let first = try SecureRandom.bytes(32)
        let second = try SecureRandom.bytes(32)
        #expect(first.count == 32)
        #expect(first != second)
        #expect(try SecureRandom.bytes(0) == [])
        #expect(throws: CryptoError.self) { try SecureRandom.bytes(-1) }
    }
}

@Suite("HTTP's optional whitespace")
struct OptionalWhitespaceTests {
    @Test("spaces and tabs come off both ends, nothing else does; text with none is returned as it is")
    func trimming() {
        let cases: [(String, String)] = [
            ("1795991785978", "1795991785978"), (" 17 ", "17"), ("\t17\t", "17"), (" \t a b \t ", "a b"),
            ("", ""), ("   ", ""), ("\t", ""), ("a", "a"), ("\u{A0}a\u{A0}", "\u{A0}a\u{A0}"), ("\na\n", "\na\n"),
            // A space carrying a combining mark is one character that is not a space: it stays.
            (" \u{301}a", " \u{301}a"), ("  \u{301}a", " \u{301}a"), ("Bearer x ", "Bearer x"),
        ]
        for (text, trimmed) in cases {
            #expect(text.trimmingOptionalWhitespace() == trimmed, "\(text.debugDescription)")
            #expect(text[...].trimmingOptionalWhitespace() == trimmed, "\(text.debugDescription)")
        }
    }
}

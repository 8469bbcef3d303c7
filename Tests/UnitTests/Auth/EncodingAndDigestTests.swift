@testable import Codecs
@testable import OpenSSLCrypto
import Foundation
import Testing

@testable import CaregiverPush
import TestSupport

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

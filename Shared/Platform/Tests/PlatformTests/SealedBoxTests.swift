import Codecs
import OpenSSLCrypto
import Testing

/// AES-256-GCM and HKDF-SHA-256, which seal the shared FCM access token at rest (docs/behaviour.md#access-token).
@Suite("sealed boxes: AES-256-GCM and HKDF-SHA-256")
struct SealedBoxTests {
    let key = HKDFSHA256.deriveKey(inputKeyMaterial: Array("a private key".utf8), salt: [1, 2, 3], info: [4])
    let data = Array("sender@example.iam.gserviceaccount.com".utf8)

    @Test("a sealed box opens under its key and data, and hides the plaintext")
    func roundTrip() throws {
        let token = Array("ya29.an-access-token-that-must-not-be-read".utf8)
        let box = try AES256GCM.seal(token, key: key, associatedData: data)
        #expect(box.count == AES256GCM.nonceLength + token.count + AES256GCM.tagLength)
        #expect(Hex.encode(box).contains(Hex.encode(Array(token.prefix(8)))) == false)
        #expect(try AES256GCM.open(box, key: key, associatedData: data) == token)
        // A fresh nonce per seal: the same token seals differently twice.
        #expect(try AES256GCM.seal(token, key: key, associatedData: data) != box)
    }

    @Test("another key, other associated data, any altered byte or a short box: it does not open")
    func refusals() throws {
        let box = try AES256GCM.seal(Array("secret".utf8), key: key, associatedData: data)
        let rotated = HKDFSHA256.deriveKey(
            inputKeyMaterial: Array("a new private key".utf8), salt: [1, 2, 3], info: [4])
        #expect(try AES256GCM.open(box, key: rotated, associatedData: data) == nil)
        #expect(try AES256GCM.open(box, key: key, associatedData: Array("other@example.com".utf8)) == nil)
        for index in box.indices {
            var altered = box
            altered[index] ^= 0x01
            #expect(try AES256GCM.open(altered, key: key, associatedData: data) == nil, "byte \(index)")
        }
        #expect(try AES256GCM.open(Array(box.prefix(27)), key: key, associatedData: data) == nil)
        #expect(throws: CryptoError.self) { try AES256GCM.seal([1], key: [1, 2, 3], associatedData: []) }
    }

    @Test("HKDF-SHA-256 matches RFC 5869's first test case (the first 32 bytes of its OKM)")
    func hkdfVector() throws {
        let okm = HKDFSHA256.deriveKey(
            inputKeyMaterial: Array(repeating: 0x0b, count: 22), salt: Array(0x00...0x0c), info: Array(0xf0...0xf9))
        #expect(Hex.encode(okm) == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf")
    }
}

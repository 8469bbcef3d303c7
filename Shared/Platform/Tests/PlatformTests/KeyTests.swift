@testable import Codecs
@testable import OpenSSLCrypto
@testable import JOSE
import Foundation
import Testing

@Suite("RSA and P-256 keys")
struct KeyTests {
    private let message = Array("header.payload".utf8)

    @Test("RS256 signatures verify, and fail for a tampered message or another algorithm")
    func rs256() throws {
        let key = try PrivateKey.generateRSA()
        let publicKey = try key.publicKey()
        let signature = try key.sign(message: message, algorithm: .rs256)
        #expect(key.kind == .rsa)
        #expect(signature.count == 256)
        #expect(publicKey.verify(signature: signature, message: message, algorithm: .rs256))
        #expect(!publicKey.verify(signature: signature, message: Array("header.payloaD".utf8), algorithm: .rs256))
        #expect(!publicKey.verify(signature: signature, message: message, algorithm: .es256))
        #expect(!publicKey.verify(signature: signature, message: message, algorithm: .hs256))
        #expect(throws: CryptoError.self) { try key.sign(message: message, algorithm: .es256) }
    }

    @Test("ES256 signs raw R‖S; its DER form converts back and does not verify as a JWS signature")
    func es256RawAndDER() throws {
        let key = try PrivateKey.generateP256()
        let publicKey = try key.publicKey()
        let raw = try key.sign(message: message, algorithm: .es256)
        #expect(raw.count == 64)
        #expect(publicKey.verify(signature: raw, message: message, algorithm: .es256))
        let der = try ECDSASignature.der(fromRaw: raw)
        #expect(der.first == 0x30)
        #expect(try ECDSASignature.raw(fromDER: der) == raw)
        #expect(!publicKey.verify(signature: der, message: message, algorithm: .es256))
        #expect(!publicKey.verify(signature: raw, message: Array("header.payloaD".utf8), algorithm: .es256))
        #expect(!publicKey.verify(signature: Array(raw.dropLast()), message: message, algorithm: .es256))
        #expect(!publicKey.verify(signature: [UInt8](repeating: 0, count: 64), message: message, algorithm: .es256))
    }

    @Test("a DER signature with trailing bytes is not converted")
    func derTrailingBytes() throws {
        let raw = try PrivateKey.generateP256().sign(message: message, algorithm: .es256)
        #expect(throws: CryptoError.self) { try ECDSASignature.raw(fromDER: ECDSASignature.der(fromRaw: raw) + [0]) }
    }

    @Test("a private key survives a PKCS#8 PEM round trip and keeps its public JWK", arguments: [true, false])
    func pemRoundTrip(rsa: Bool) throws {
        let key = rsa ? try PrivateKey.generateRSA() : try PrivateKey.generateP256()
        let pem = try key.pemPKCS8()
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
        let reloaded = try PrivateKey(pem: pem)
        #expect(try reloaded.jwk(kid: "k") == key.jwk(kid: "k"))
        let algorithm = key.kind.signingAlgorithm
        let signature = try reloaded.sign(message: message, algorithm: algorithm)
        #expect(try key.publicKey().verify(signature: signature, message: message, algorithm: algorithm))
        #expect(try key.publicKeyPEM().hasPrefix("-----BEGIN PUBLIC KEY-----\n"))
        #expect(try PublicKey(pem: key.publicKeyPEM()).jwk(kid: "k") == key.jwk(kid: "k"))
    }

    @Test("Ed25519: sign, verify, PEM and JWK round trips; a changed message, a short signature or another alg fail")
    func ed25519() throws {
        let key = try PrivateKey.generateEd25519()
        #expect(key.kind == .ed25519 && key.kind.signingAlgorithm == .edDSA)
        let signature = try key.sign(message: message, algorithm: .edDSA)
        #expect(signature.count == 64)
        let publicKey = try PublicKey(jwk: key.jwk(kid: "k"))
        #expect(publicKey.verify(signature: signature, message: message, algorithm: .edDSA))
        #expect(!publicKey.verify(signature: signature, message: message + [0], algorithm: .edDSA))
        #expect(!publicKey.verify(signature: Array(signature.dropLast()), message: message, algorithm: .edDSA))
        #expect(!publicKey.verify(signature: signature, message: message, algorithm: .es256))
        #expect(throws: CryptoError.self) { try key.sign(message: message, algorithm: .es256) }
        let reloaded = try PrivateKey(pem: key.pemPKCS8())
        #expect(try reloaded.jwk(kid: "k") == key.jwk(kid: "k"))
        #expect(try PublicKey(pem: key.publicKeyPEM()).jwk(kid: "k") == key.jwk(kid: "k"))
        // An `x` that is not 32 bytes does not import.
        guard case .object(var members) = try key.jwk(kid: "k") else { return }
        members["x"] = .string(Base64URL.encode([UInt8](repeating: 7, count: 31)))
        #expect(throws: CryptoError.self) { try PublicKey(jwk: .object(members)) }
    }

    @Test("a traditional BEGIN RSA PRIVATE KEY PEM is accepted")
    func traditionalRSA() throws {
        let key = try PrivateKey(pem: Self.traditionalRSAPEM)
        #expect(key.kind == .rsa)
        let signature = try key.sign(message: message, algorithm: .rs256)
        #expect(try key.publicKey().verify(signature: signature, message: message, algorithm: .rs256))
    }

    @Test("garbage PEM and too-small RSA sizes are refused")
    func refusals() throws {
        #expect(throws: CryptoError.self) {
            try PrivateKey(pem: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
        }
        #expect(throws: CryptoError.self) { try PrivateKey(pem: try PrivateKey.generateP256().publicKeyPEM()) }
        #expect(throws: CryptoError.self) { try PrivateKey.generateRSA(bits: 1024) }
    }

    @Test("public JWKs round-trip with members kty, kid, alg, use and key parameters")
    func jwkRoundTrip() throws {
        let ec = try PrivateKey.generateP256().jwk(kid: "ec")
        #expect(ec["kty"] == .string("EC"))
        #expect(ec["crv"] == .string("P-256"))
        #expect(ec["alg"] == .string("ES256"))
        #expect(ec["use"] == .string("sig"))
        #expect(ec["kid"] == .string("ec"))
        #expect(ec["d"] == nil)
        #expect(try PublicKey(jwk: ec).jwk(kid: "ec") == ec)
        let rsa = try PrivateKey.generateRSA().jwk(kid: "rsa")
        #expect(rsa["e"] == .string("AQAB"))
        #expect(rsa["alg"] == .string("RS256"))
        #expect(try PublicKey(jwk: rsa).kind == .rsa)
    }

    @Test("an EC point that is not on the curve is refused")
    func pointNotOnCurve() throws {
        guard case .object(var members) = try PrivateKey.generateP256().jwk(kid: "ec"),
            var y = Base64URL.decode(members["y"]?.stringValue ?? "")
        else { Issue.record("expected a JWK object"); return }
        y[31] ^= 0x01
        members["y"] = .string(Base64URL.encode(y))
        #expect(throws: CryptoError.self) { try PublicKey(jwk: .object(members)) }
        members["y"] = .string(Base64URL.encode(y.dropLast()))
        #expect(throws: CryptoError.self) { try PublicKey(jwk: .object(members)) }
    }

    @Test("an RSA modulus under 2048 bits is refused as weak")
    func weakRSA() throws {
        guard case .object(var members) = try PrivateKey.generateRSA().jwk(kid: "rsa"),
            let modulus = Base64URL.decode(members["n"]?.stringValue ?? "")
        else { Issue.record("expected a JWK object"); return }
        members["n"] = .string(Base64URL.encode(modulus.prefix(128)))
        #expect(throws: CryptoError(.weakKey, operation: "EVP_PKEY_get_bits")) { try PublicKey(jwk: .object(members)) }
    }

    @Test("other key types and curves are unsupported")
    func unsupported() {
        #expect(throws: CryptoError.self) {
            try PublicKey(jwk: .object(["kty": .string("oct"), "k": .string("AAAA")]))
        }
        let p384: JSONValue = .object([
            "kty": .string("EC"), "crv": .string("P-384"), "x": .string("AA"), "y": .string("AA"),
        ])
        #expect(throws: CryptoError(.unsupportedKey, operation: "JWK crv")) { try PublicKey(jwk: p384) }
    }

    /// A throw-away 2048-bit key made with `openssl genrsa -traditional 2048` for this test only.
    static let traditionalRSAPEM = """
        -----BEGIN RSA PRIVATE KEY-----
        MIIEowIBAAKCAQEAnOpLB4dzM6NifjAD6zJSr5J5mVjGUdk9rsOmz4lPreLOkv0/
        BwwDm0UsWLMnTcysZR38AmFvHiIxmdstG4wTXOe1fBEGI/Prdni1C7rUiHMbHeay
        9QxltJR1tdBzMFEVgeosm+TJBEmL/T4adbnNhFNboGNfVRk1631rD/+YdgVILgU4
        dfOeBfe2gTTuiImfCYW/JegNWHw80j/obMvtbqJesPdrCQTovgQ0lANGVq+dpug7
        +DepEtfpSSOV/GI2nPGs4rAgTs8eD4sodM0NeKpEoktshFH06KGuq96cnGYEDf2N
        9apYWb+1htFH7GIu6uWz4fm9QZ4D6sjFZ9ddAQIDAQABAoIBAACqD3XBczGN697G
        MMOoFtU5jN+JkoaQeyEFIOzPGcHnpfS8DKGCW0LzxMRX9wVh2OP+GVqtBp9AlhtF
        SoUlYp3M0rk3ydUd1TDowc/bwC0XG0Kh5XJbCLr+OufxZGw/fgeq0fptLXp7awbz
        Ymf+FW20CNbRvOEh5j2WoX0NZoJil/Cg2wu/Y8RGmSGhf4/DpbKW7zoaImo5vERB
        iGslBKLKCeqRmEAwxJEGGPmehWtLmRtFnR28PDUbYrRrSOaPd/j9LdHBBCVDm/U3
        Y02tH5HlzQAdaMP6gOEa90hDGYTwM/HBu1MKK/j96QKa02Y3UVvpvgR+3luTx2C4
        yQYdV8ECgYEA02hfm5WxgB4GihkG4rpEZkaMgCpKLmh5x1ctqcTKLTUR8RTZ3DBt
        bh20auOOc+e54K5PEUt1gmnwL3TwrQ1cqrSfHmVIqmclk2aZfpqRjtL8SLoXo+9W
        SqjeFea5QT1+DyA7AR3KHsThcPGiHh7c4QnGes11+C5ALwzssCJOvVECgYEAvgNs
        zIeltTZy/TsUQ5IaWhUzow+VFu+AdZS487Vl7T7M/2NEhgxKkQJVmhAkg0Bk93N7
        VCaNVXKE5SUVCvBvHiWKmi13bGtfJxQGoutS158EZUN+Twds01jF9gcuUvxACxxJ
        GHjvTKsqwccdWgVT3v1ms/5WO2oQyEV3MOgA+LECgYA7Hz1drYduZPc/N7CNR7pJ
        QAGa9ji4sc8cyGykxbwk2GqkGUi0I3b3DKegHPOBxpRdGWJTW98JEcdx/iowu0Pn
        GYxGW9zuitofVtomZeO/JZIYZLKnzg874e36AgRdEm1mnYTi0wnrgPPrOig0dD0h
        UjKHtV4Agi7A+cRXncCXgQKBgEVLQnYkUc4QGUc4MF+j/HA1oysoF5rRpOs8XWaj
        FJS8fk30iZzJBrhzPXx9vpMO/MMxHhzGImyy4rweFdpzbFJ2JmGriw3C6mR57SGk
        6AUyPIwhXQK9FnbMvQTIAaDJ1SE4I4AFOl+fXGxmjNGzd66ugrHJYvEv8QbYLmtr
        cE9BAoGBALBskrM/6W2UmzVkKEXjLq2dKGJA1ZsAHFGatieS7nPPXlgKJ1mJRNWE
        eDdqMBUT3tSrqQGweIrd9GliDYNWE0QOqwDkykmCz0C2jte2nTOHn9xuGk6lR0gP
        lFCqKyQQQ+9r3QjUTdkNBiMYbfGKNSeXjkaQM+iFDKhfEnmsbuGa
        -----END RSA PRIVATE KEY-----
        """
}

import COpenSSL

/// Sole owner of one OpenSSL `BIGNUM`, and the conversions between big-endian bytes and `BIGNUM`s.
final class BigNumber {
    private let handle: OpaquePointer

    /// A non-negative number from its big-endian bytes (leading zero bytes are allowed).
    /// - Throws: ``CryptoError`` when OpenSSL cannot allocate it.
    init(bigEndian bytes: [UInt8]) throws {
        guard bytes.count <= Int(Int32.max) else { throw CryptoError(.invalidArgument, operation: "BN_bin2bn") }
        let handle = bytes.withUnsafeBufferPointer { buffer in
            BN_bin2bn(buffer.baseAddress, Int32(buffer.count), nil)
        }
        guard let handle else { throw CryptoError.openSSL("BN_bin2bn") }
        self.handle = handle
    }

    /// Takes ownership of a `BIGNUM` that OpenSSL handed to the caller (e.g. from `EVP_PKEY_get_bn_param`).
    init(taking handle: OpaquePointer) {
        self.handle = handle
    }

    deinit {
        BN_free(handle)
    }

    /// Lends the handle to an OpenSSL call; it must not be kept after `body` returns unless the caller keeps
    /// `self` alive as long as OpenSSL uses it.
    func withHandle<Result>(_ body: (OpaquePointer) throws -> Result) rethrows -> Result {
        try body(handle)
    }

    /// The number as big-endian bytes: minimal (no leading zero byte) when `width` is `nil`, otherwise
    /// left-padded with zeros to exactly `width` bytes.
    /// - Throws: ``CryptoError`` when the number does not fit `width`.
    func bytes(width: Int? = nil) throws -> [UInt8] {
        try Self.bytes(ofBorrowed: handle, width: width)
    }

    /// Like ``bytes(width:)`` for a `BIGNUM` owned by someone else (e.g. the parts of an `ECDSA_SIG`).
    static func bytes(ofBorrowed number: OpaquePointer, width: Int?) throws -> [UInt8] {
        let needed = (Int(BN_num_bits(number)) + 7) / 8
        let size = width ?? needed
        guard needed <= size, size <= Int(Int32.max) else {
            throw CryptoError(.invalidArgument, operation: "BN_bn2binpad")
        }
        var output = [UInt8](repeating: 0, count: size)
        guard size > 0 else { return output }
        let written = output.withUnsafeMutableBufferPointer { buffer in
            BN_bn2binpad(number, buffer.baseAddress, Int32(buffer.count))
        }
        guard written == Int32(size) else { throw CryptoError.openSSL("BN_bn2binpad") }
        return output
    }
}

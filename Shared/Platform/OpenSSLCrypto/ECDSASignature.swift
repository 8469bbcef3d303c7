import COpenSSL

/// Conversion between the two encodings of an ECDSA signature (r, s).
///
/// OpenSSL produces and expects DER (`SEQUENCE { INTEGER r, INTEGER s }`); JWS ES256 (RFC 7518 §3.4) uses the
/// fixed-width concatenation R‖S, 32 bytes each for P-256. A token carrying DER must be rejected, so the verifier
/// only ever converts from the raw form, whose length is checked first.
enum ECDSASignature {
    /// The width of r and of s for P-256.
    static let p256ComponentLength = 32

    /// The JWS form R‖S of a DER signature, each part left-padded to `componentLength` bytes.
    /// - Throws: ``CryptoError`` when `der` is not exactly one DER `ECDSA-Sig-Value` or a part is too wide.
    static func raw(fromDER der: [UInt8], componentLength: Int = p256ComponentLength) throws -> [UInt8] {
        var consumed = 0
        let signature: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            let decoded = d2i_ECDSA_SIG(nil, &cursor, buffer.count)
            if let cursor, let start = buffer.baseAddress { consumed = cursor - start }
            return decoded
        }
        guard let signature else { throw CryptoError.openSSL("d2i_ECDSA_SIG", code: .invalidArgument) }
        defer { ECDSA_SIG_free(signature) }
        guard consumed == der.count else { throw CryptoError(.invalidArgument, operation: "d2i_ECDSA_SIG") }
        var r: OpaquePointer?
        var s: OpaquePointer?
        ECDSA_SIG_get0(signature, &r, &s)
        guard let r, let s else { throw CryptoError(.libraryFailure, operation: "ECDSA_SIG_get0") }
        return try BigNumber.bytes(ofBorrowed: r, width: componentLength)
            + BigNumber.bytes(ofBorrowed: s, width: componentLength)
    }

    /// The DER form of a JWS R‖S signature.
    /// - Throws: ``CryptoError`` when `raw` is not exactly `2 × componentLength` bytes, or OpenSSL fails.
    static func der(fromRaw raw: [UInt8], componentLength: Int = p256ComponentLength) throws -> [UInt8] {
        guard componentLength > 0, raw.count == 2 * componentLength else {
            throw CryptoError(.invalidArgument, operation: "ECDSA_SIG_set0")
        }
        guard let signature = ECDSA_SIG_new() else { throw CryptoError.openSSL("ECDSA_SIG_new") }
        defer { ECDSA_SIG_free(signature) }
        var r = Array(raw[..<componentLength]).withUnsafeBufferPointer { buffer in
            BN_bin2bn(buffer.baseAddress, Int32(buffer.count), nil)
        }
        var s = Array(raw[componentLength...]).withUnsafeBufferPointer { buffer in
            BN_bin2bn(buffer.baseAddress, Int32(buffer.count), nil)
        }
        // Frees whichever parts are still ours; after ECDSA_SIG_set0 succeeds they belong to `signature`.
        defer {
            BN_free(r)
            BN_free(s)
        }
        guard let rHandle = r, let sHandle = s else { throw CryptoError.openSSL("BN_bin2bn") }
        try requireOne(ECDSA_SIG_set0(signature, rHandle, sHandle), "ECDSA_SIG_set0")
        r = nil
        s = nil

        let length = i2d_ECDSA_SIG(signature, nil)
        guard length > 0 else { throw CryptoError.openSSL("i2d_ECDSA_SIG") }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return i2d_ECDSA_SIG(signature, &cursor)
        }
        guard written == length else { throw CryptoError.openSSL("i2d_ECDSA_SIG") }
        return der
    }
}

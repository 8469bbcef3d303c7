import COpenSSL

/// Sole owner of one OpenSSL memory `BIO`, the in-memory stream that PEM reading and writing go through.
///
/// Bytes are copied in with `BIO_write`, so no Swift buffer has to outlive the call that lends it.
final class MemoryBIO {
    private let handle: OpaquePointer

    /// An empty stream for OpenSSL to write into.
    /// - Throws: ``CryptoError`` when OpenSSL cannot allocate it.
    init() throws {
        guard let handle = BIO_new(BIO_s_mem()) else { throw CryptoError.openSSL("BIO_new") }
        self.handle = handle
    }

    /// A stream holding a copy of `contents`, for OpenSSL to read; reading past the end is end-of-file,
    /// not "try again later".
    /// - Throws: ``CryptoError`` when OpenSSL cannot allocate or fill it.
    convenience init(contents: [UInt8]) throws {
        try self.init()
        try write(contents)
        // BIO_set_mem_eof_return(bio, 0) is a macro over BIO_ctrl; without it a truncated PEM reads as "retry".
        guard BIO_ctrl(handle, BIO_C_SET_BUF_MEM_EOF_RETURN, 0, nil) == 1 else {
            throw CryptoError.openSSL("BIO_set_mem_eof_return")
        }
    }

    deinit {
        _ = BIO_free(handle)
    }

    /// Lends the handle to an OpenSSL call; it must not be kept after `body` returns.
    func withHandle<Result>(_ body: (OpaquePointer) throws -> Result) rethrows -> Result {
        try body(handle)
    }

    /// Appends a copy of `bytes` to the stream.
    func write(_ bytes: [UInt8]) throws {
        guard !bytes.isEmpty else { return }
        guard bytes.count <= Int(Int32.max) else { throw CryptoError(.invalidArgument, operation: "BIO_write") }
        let written = bytes.withUnsafeBytes { buffer in
            BIO_write(handle, buffer.baseAddress, Int32(buffer.count))
        }
        guard written == Int32(bytes.count) else { throw CryptoError.openSSL("BIO_write") }
    }

    /// Everything written to the stream and not yet read.
    func readAll() throws -> [UInt8] {
        let pending = BIO_ctrl_pending(handle)
        guard pending > 0 else { return [] }
        guard pending <= Int32.max else { throw CryptoError(.libraryFailure, operation: "BIO_ctrl_pending") }
        var output = [UInt8](repeating: 0, count: Int(pending))
        let read = output.withUnsafeMutableBytes { buffer in
            BIO_read(handle, buffer.baseAddress, Int32(buffer.count))
        }
        guard read == Int32(pending) else { throw CryptoError.openSSL("BIO_read") }
        return output
    }

    /// Everything written to the stream, as text (PEM is ASCII).
    func readAllText() throws -> String {
        String(decoding: try readAll(), as: UTF8.self)
    }
}

import Foundation

/// A file only its owner may read: the local stack's secrets (`.data/dev-jwt-secret`, the dev signing key).
///
/// Created with `O_CREAT | O_EXCL` and mode 0600 before a byte is written, so the secret is never readable by others,
/// not even for a moment; one left 0644 by an older version is made private when it is read.
public enum PrivateFile {
    /// The file's text when it exists (its mode forced to 0600), else `make()`'s, written to a new 0600 file.
    /// - Parameters:
    ///   - path: the file.
    ///   - isUsable: whether an existing text may be kept (e.g. long enough); one that is not is replaced.
    ///   - make: the new text when there is none.
    /// - Throws: when the file cannot be read, made private, created or written.
    public static func readOrCreate(
        atPath path: String, isUsable: (String) -> Bool = { _ in true }, make: () throws -> String
    ) throws -> String {
        if let existing = try? String(contentsOfFile: path, encoding: .utf8), isUsable(existing) {
            guard chmod(path, 0o600) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EPERM) }
            return existing
        }
        let text = try make()
        unlink(path)
        try create(atPath: path, contents: Array(text.utf8))
        return text
    }

    /// Writes `contents` to a new file that is 0600 from its creation.
    /// - Throws: `EEXIST` when the file exists; any other error of `open` or `write`.
    public static func create(atPath path: String, contents: [UInt8]) throws {
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        var written = 0
        while written < contents.count {
            let n = contents[written...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            written += n
        }
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The process's stdin, stdout and stderr as plain file descriptors (FoundationEssentials has no `FileHandle`).
public enum StandardStreams {
    /// Reads stdin to EOF; `nil` when it holds more than `limit` bytes, or when it cannot be read.
    public static func readInput(limit: Int) -> [UInt8]? {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if count == 0 { return bytes }
            if count < 0 {
                if errno == EINTR { continue }
                // An unreadable stdin (closed, a directory) is treated as an empty event.
                return bytes
            }
            bytes.append(contentsOf: chunk[0..<count])
            if bytes.count > limit { return nil }
        }
    }

    /// Writes all of `bytes` to `descriptor`. Returns `false` when the reader has gone (EPIPE) or on another error.
    @discardableResult
    public static func writeAll(_ bytes: [UInt8], to descriptor: Int32) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes {
                write(descriptor, $0.baseAddress! + offset, bytes.count - offset)
            }
            if written < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += written
        }
        return true
    }

    /// Gives the host its EOF now: fd 1 is pointed at /dev/null, which closes the pipe, and keeps fd 1 taken so
    /// that no later `open` can land on it and receive a stray write.
    public static func closeOutput() {
        let devNull = open("/dev/null", O_WRONLY)
        if devNull >= 0 {
            dup2(devNull, STDOUT_FILENO)
            close(devNull)
        } else {
            close(STDOUT_FILENO)
        }
    }
}

import Foundation
import Synchronization

/// Everything the functions and the runner said during the test run — response bodies, stdout, stderr — appended
/// to `$LEAK_CAPTURE_DIR/<pid>.log` when `make test` sets that variable. `scripts/leak-scan.py` then looks through
/// all of it for tokens, keys and medication names (the whole-run leak check): a test that forgets to check
/// one output is still covered.
package enum LeakCapture {
    private static let file: Mutex<FileHandle?> = {
        guard let directory = ProcessInfo.processInfo.environment["LEAK_CAPTURE_DIR"], !directory.isEmpty else {
            return Mutex(nil)
        }
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = "\(directory)/swift-test-\(ProcessInfo.processInfo.processIdentifier).log"
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let handle = FileHandle(forWritingAtPath: path)
        _ = try? handle?.seekToEnd()
        return Mutex(handle)
    }()

    /// Appends one output, framed by its source, when capturing is on.
    package static func record(_ text: String, source: String) {
        guard !text.isEmpty else { return }
        file.withLock { handle in
            guard let handle else { return }
            try? handle.write(contentsOf: Data("\n=== \(source)\n".utf8) + Data(text.utf8))
        }
    }

    package static func record(_ bytes: some Collection<UInt8>, source: String) {
        record(String(decoding: bytes, as: UTF8.self), source: source)
    }
}

import ProcessSupervision
import Foundation
import Logging

/// Watches source directories (by modification time, once a second) and rebuilds the functions when a file
/// changes, then calls `reload` so that warm workers restart on the new binaries (cold ones pick them up anyway).
struct SourceWatcher: Sendable {
    let directories: [String]
    /// What to rebuild: the function table's names (infra/functions.json).
    let functions: [String]
    let logger: Logger
    let reload: @Sendable () async -> Void

    func run() async {
        var last = latestModification()
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(1))
            let current = latestModification()
            guard current > last else { continue }
            // Let an editor finish writing before building.
            try? await Task.sleep(for: .milliseconds(300))
            last = latestModification()
            logger.info("source changed: rebuilding the functions")
            if await rebuild() {
                logger.info("functions rebuilt: restarting workers")
                await reload()
            } else {
                logger.error("rebuild failed: still serving the previous build (see the compiler output above)")
            }
        }
    }

    private func latestModification() -> Date {
        var latest = Date.distantPast
        for directory in directories {
            guard let files = FileManager.default.enumerator(atPath: directory) else { continue }
            while let file = files.nextObject() as? String {
                guard file.hasSuffix(".swift") || file.hasSuffix(".h") else { continue }
                let attributes = try? FileManager.default.attributesOfItem(atPath: "\(directory)/\(file)")
                if let modified = attributes?[.modificationDate] as? Date, modified > latest { latest = modified }
            }
        }
        return latest
    }

    /// One `swift build --product` per function: SwiftPM builds only the last of several `--product` options.
    private func rebuild() async -> Bool {
        for function in functions {
            guard
                let result = try? await ChildProcess.run(
                    executable: URL(fileURLWithPath: "/usr/bin/env"),
                    arguments: ["swift", "build", "--product", function],
                    input: Data(), forwardStandardError: true)
            else { return false }
            FileHandle.standardError.write(result.standardOutput)
            guard result.exitStatus == 0 else { return false }
        }
        return true
    }
}

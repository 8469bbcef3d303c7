import Foundation

/// A built function started as a warm worker on a Runtime API at `127.0.0.1:port` (its output discarded), killed when
/// released. For the tests that play the Lambda service's side themselves.
package final class RuntimeAPIWorker {
    private let process = Process()

    package init(_ function: String, port: Int, environment: [String: String]) throws {
        process.executableURL = Executables.binDirectory.appendingPathComponent(function)
        var all = environment
        all["AWS_LAMBDA_RUNTIME_API"] = "127.0.0.1:\(port)"
        process.environment = all
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    /// Whether the worker has not exited.
    package var isRunning: Bool { process.isRunning }

    /// Kills the worker (SIGKILL, as Lambda freezes and ends an environment) and reaps it.
    package func stop() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

extension TestDatabase {
    /// A copy of the shipped migrations in a new temporary folder, plus one more file `name` holding `sql`; the caller
    /// removes the folder.
    package static func migrationsDirectory(adding name: String, sql: String) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("migrations-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for file in try FileManager.default.contentsOfDirectory(atPath: migrationsDirectory.path) {
            try FileManager.default.copyItem(
                at: migrationsDirectory.appendingPathComponent(file), to: directory.appendingPathComponent(file))
        }
        try sql.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
        return directory
    }
}

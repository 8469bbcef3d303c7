import Foundation

/// A local stand-in written in Python (`python3 -c script arguments…`) that prints the port it listens on as its
/// first line: the one way the tests' Python fakes are started and their port read. Its output after that line,
/// and its errors, are discarded; the caller stops it.
package enum PythonServer {
    package struct DidNotStart: Error {}

    /// Starts `script` and waits for its port.
    /// - Throws: ``DidNotStart`` when its first line is not a port (the process is terminated).
    package static func start(_ script: String, arguments: [String]) throws -> (Process, Int) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script] + arguments
        process.standardInput = FileHandle.nullDevice
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        try process.run()
        var line = Data()
        while let byte = try? stdout.fileHandleForReading.read(upToCount: 1), let first = byte.first,
            first != UInt8(ascii: "\n")
        {
            line.append(first)
        }
        guard let port = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespaces)) else {
            process.terminate()
            process.waitUntilExit()
            throw DidNotStart()
        }
        return (process, port)
    }
}

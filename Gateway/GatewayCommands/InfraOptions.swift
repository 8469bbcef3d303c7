import FunctionGateway
import ProcessSupervision
import ArgumentParser
import Foundation

/// Options shared by the subcommands that need the repository's `infra/` (or the image's `/app/infra`).
package struct InfraOptions: ParsableArguments {
    @Option(help: "The function table.")
    package var functions: String = "infra/functions.json"

    @Option(help: "The directory holding the built function executables (default: this executable's own directory).")
    package var binDir: String?

    package init() {}

    package func functionTable() throws -> FunctionTable {
        try FunctionTable(contentsOf: URL(fileURLWithPath: functions))
    }

    /// Each function that may run is built in `directory` (a scheduled one only when schedules are on; a deploy-time
    /// one never runs here).
    /// - Throws: a `ValidationError` naming the first function that is not.
    package func checkBuilt(_ table: FunctionTable, in directory: URL, schedules: Scheduler.Setting) throws {
        for function in table.functions
        where function.routeKey != nil || (function.schedule != nil && schedules != .off) {
            guard FileManager.default.isExecutableFile(atPath: directory.appendingPathComponent(function.name).path)
            else {
                throw ValidationError("\(function.name) is not built in \(directory.path); run `swift build` first")
            }
        }
    }

    /// Where the function executables are: next to this executable unless told otherwise.
    package func binaryDirectory() -> URL {
        if let binDir { return URL(fileURLWithPath: binDir) }
        let executablePath = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        return executablePath.deletingLastPathComponent()
    }
}

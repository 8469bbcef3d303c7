import ArgumentParser
import CaregiverPush
import Foundation
import Logging

/// The local stand-in for the function host (SPEC §10).
@main
struct Runner: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "runner",
        abstract: "Run the caregiver-push functions locally, the way a serverless host runs them.",
        subcommands: [
            DevCommand.self, ServeCommand.self, Invoke.self, Migrate.self, Token.self, FCMEmulatorCommand.self,
        ]
    )
}

/// Options shared by the subcommands that need the repository's `infra/`.
struct InfraOptions: ParsableArguments {
    @Option(help: "The function table.")
    var functions: String = "infra/functions.json"

    @Option(help: "The directory holding the built function executables (default: the runner's own directory).")
    var binDir: String?

    func functionTable() throws -> FunctionTable {
        try FunctionTable(contentsOf: URL(fileURLWithPath: functions))
    }

    /// Each function that may run is built in `directory` (a scheduled one only when schedules are on).
    /// - Throws: a `ValidationError` naming the first function that is not.
    func checkBuilt(_ table: FunctionTable, in directory: URL, schedules: Scheduler.Setting) throws {
        for function in table.functions where function.routeKey != nil || schedules != .off {
            guard FileManager.default.isExecutableFile(atPath: directory.appendingPathComponent(function.name).path)
            else {
                throw ValidationError("\(function.name) is not built in \(directory.path); run `swift build` first")
            }
        }
    }

    /// Where the function executables are: next to the runner unless told otherwise.
    func binaryDirectory() -> URL {
        if let binDir { return URL(fileURLWithPath: binDir) }
        let runnerPath = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        return runnerPath.deletingLastPathComponent()
    }
}

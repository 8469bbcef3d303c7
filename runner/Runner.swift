import ProcessSupervision
import ArgumentParser
import CaregiverPush
import Foundation
import Logging

/// The local stand-in for the function host (docs/behaviour.md#gateway).
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

extension ParsableCommand {
    /// Runs a subcommand's work; an error ends the process with that subcommand's usage (`runner token …`), not the
    /// top level's `runner <subcommand>`, which is what ArgumentParser prints for an error thrown from `run()`.
    func reportingErrors(_ body: () throws -> Void) {
        do {
            try body()
        } catch {
            Self.exitShowingUsage(error)
        }
    }

    func reportingErrors(_ body: () async throws -> Void) async {
        do {
            try await body()
        } catch {
            Self.exitShowingUsage(error)
        }
    }

    private static func exitShowingUsage(_ error: any Error) -> Never {
        guard let validation = error as? ValidationError else { Runner.exit(withError: error) }
        let text = """
            Error: \(validation.message)
            Usage: \(Runner.usageString(for: Self.self))
              See 'runner \(_commandName) --help' for more information.

            """
        FileHandle.standardError.write(Data(text.utf8))
        Runner.exit(withError: ExitCode.validationFailure)
    }
}

import ArgumentParser
import Foundation

extension ParsableCommand {
    /// Runs a subcommand's work; an error ends the process with that subcommand's usage (`runner token …`), not the
    /// top level's `runner <subcommand>`, which is what ArgumentParser prints for an error thrown from `run()`.
    /// - Parameter root: the top-level command (`gateway` or `runner`) whose usage line names this one.
    package func reportingErrors<Root: ParsableCommand>(root: Root.Type, _ body: () throws -> Void) {
        do {
            try body()
        } catch {
            Self.exitShowingUsage(error, root: root)
        }
    }

    package func reportingErrors<Root: ParsableCommand>(root: Root.Type, _ body: () async throws -> Void) async {
        do {
            try await body()
        } catch {
            Self.exitShowingUsage(error, root: root)
        }
    }

    private static func exitShowingUsage<Root: ParsableCommand>(_ error: any Error, root: Root.Type) -> Never {
        guard let validation = error as? ValidationError else { Root.exit(withError: error) }
        let text = """
            Error: \(validation.message)
            Usage: \(Root.usageString(for: Self.self))
              See '\(Root._commandName) \(_commandName) --help' for more information.

            """
        FileHandle.standardError.write(Data(text.utf8))
        Root.exit(withError: ExitCode.validationFailure)
    }
}

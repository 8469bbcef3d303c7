import GatewayCommands
import ArgumentParser

/// The developer's tool: the local stack (`dev`), `serve` with the FCM emulator, one-off invocations, tokens, the
/// emulator alone; on top of the production gateway (Gateway/), which the image ships as `gateway`.
@main
struct Runner: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "runner",
        abstract: "Run the caregiver-push functions locally, the way a serverless host runs them.",
        subcommands: [
            DevCommand.self, ServeCommand.self, Invoke.self, Migrate<Runner>.self, Token.self, FCMEmulatorCommand.self,
            CheckDeployment.self,
        ]
    )
}

extension ParsableCommand {
    /// Runs a subcommand's work; an error ends the process with that subcommand's usage (`runner token …`).
    func reportingErrors(_ body: () throws -> Void) {
        reportingErrors(root: Runner.self, body)
    }

    func reportingErrors(_ body: () async throws -> Void) async {
        await reportingErrors(root: Runner.self, body)
    }
}

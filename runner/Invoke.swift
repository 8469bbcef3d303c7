import ProcessSupervision
import ArgumentParser
import GatewayCommands
import Foundation

/// `runner invoke <function> [event.json]`: one invocation through the built executable, like `sam local invoke`;
/// `echo '{}' | runner invoke push-sweep` runs a sweep by hand.
struct Invoke: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Pipe one event (a file, or stdin) through a built function and print its output: an API Gateway 2.0 event "
            + "for a routed function, a Scheduled Event (or {}) for a scheduled one.",
        discussion: """
            The function runs with the runner's environment, so set what it reads: DATABASE_URL, \
            SUPABASE_JWT_SECRET (or SUPABASE_JWKS), PUSH_ENVIRONMENT, and for pushes FCM_SERVICE_ACCOUNT_JSON \
            (docs/deploy.md lists the others). Against the `make dev` stack: \
            DATABASE_URL="$(PG_PASSWORD_FILE=.data/postgres.password scripts/pg.sh url 25432)" \
            SUPABASE_JWT_SECRET="$(cat .data/dev-jwt-secret)" PUSH_ENVIRONMENT=DEV (the dev secret lives in \
            .data/dev-jwt-secret); `make dev` prints a complete line.
            """)

    @Argument(help: "The function name, e.g. push-register.")
    var function: String

    @Argument(help: "The event file; stdin when omitted.")
    var event: String?

    @OptionGroup var infra: InfraOptions

    func run() async {
        await reportingErrors { try await start() }
    }

    private func start() async throws {
        let table = try infra.functionTable()
        guard table.function(named: function) != nil else {
            let names = table.functions.map(\.name).joined(separator: ", ")
            throw ValidationError("unknown function \(function); the function table has: \(names)")
        }
        let eventData: Data
        if let event {
            eventData = try Data(contentsOf: URL(fileURLWithPath: event))
        } else {
            eventData = FileHandle.standardInput.readDataToEndOfFile()
        }
        let executable = infra.binaryDirectory().appendingPathComponent(function)
        guard FileManager.default.isExecutableFile(atPath: executable.path) else {
            throw ValidationError("\(executable.path) is not built; run `swift build` first")
        }
        let result = try await ChildProcess.run(executable: executable, input: eventData, forwardStandardError: true)
        FileHandle.standardOutput.write(result.standardOutput)
        if result.exitStatus != 0 {
            throw ExitCode(result.exitStatus)
        }
    }
}

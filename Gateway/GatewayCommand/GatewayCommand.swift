import GatewayCommands
import ArgumentParser

/// The production host the container image ships: `gateway serve` (the functions over HTTP, cold or warm, with the
/// edge's limits and the schedules), `gateway migrate`, and `gateway households` (households for a team with no app
/// backend). Nothing of the developer's tools (`runner`) is in it.
@main
struct GatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway",
        abstract: "Serve the caregiver-push functions over HTTP, the way API Gateway and Lambda run them.",
        subcommands: [Serve.self, Migrate<GatewayCommand>.self, Households<GatewayCommand>.self]
    )
}

/// `gateway serve`: the function table over HTTP.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve the function table over HTTP, invoking the built functions cold or warm.",
        discussion: """
            Environment: passed on to every function, which reads DATABASE_URL, SUPABASE_JWT_SECRET, SUPABASE_JWKS \
            or SUPABASE_JWKS_URL, PUSH_ENVIRONMENT, FCM_SERVICE_ACCOUNT_JSON and the PUSH_*/DATABASE_* bounds \
            (docs/behaviour.md#configuration). AWS_REGION names the region of scheduled events.
            """
    )

    @OptionGroup var options: ServeOptions

    func run() async {
        await reportingErrors(root: GatewayCommand.self) { try await options.serve(label: "gateway") }
    }
}

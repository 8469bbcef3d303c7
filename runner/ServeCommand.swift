import GatewayCommands
import ArgumentParser

/// `runner serve`: `gateway serve` with, when asked for, the FCM emulator on the same port.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve the function table over HTTP, invoking the built functions cold or warm.",
        discussion: """
            Environment: passed on to every function, which reads DATABASE_URL, SUPABASE_JWT_SECRET, SUPABASE_JWKS \
            or SUPABASE_JWKS_URL, PUSH_ENVIRONMENT, FCM_SERVICE_ACCOUNT_JSON and the PUSH_*/DATABASE_* bounds \
            (docs/behaviour.md#configuration). With --fcm-emulator the runner sets \
            FCM_SERVICE_ACCOUNT_JSON and FCM_API_BASE_URL itself (and PUSH_ENVIRONMENT=DEV unless set). AWS_REGION \
            names the region of scheduled events. For a dev secret, `make dev`'s lives in .data/dev-jwt-secret. \
            The image ships `gateway serve`, which takes the same options but --fcm-emulator.
            """
    )

    @OptionGroup var options: ServeOptions

    @Flag(help: "Also serve the FCM emulator here and point the functions at it with a throwaway service account.")
    var fcmEmulator = false

    func run() async {
        await reportingErrors {
            try await options.serve(
                label: "runner", extensions: fcmEmulator ? [try EmulatorExtension()] : [], developerTool: true)
        }
    }
}

import Hummingbird
import Logging
import ServiceLifecycle

/// Something the gateway serves beside the functions without knowing what it is: the runner's FCM emulator
/// (`runner serve --fcm-emulator`, `runner dev`) is one. The production gateway (`gateway serve`) has none, so this
/// library needs none of the developer's tools.
package protocol GatewayExtension: Sendable {
    /// Routes of its own on the public port, after the function routes.
    func addRoutes(to router: Router<GatewayContext>)

    /// Services to run for as long as the gateway runs (listeners of its own).
    func services(logger: Logger) async throws -> [any Service]

    /// Once the public port is bound and before any warm worker starts: what to add to the functions' environment,
    /// given the environment so far (it may wait for its own services to be listening).
    func functionEnvironment(current: [String: String], logger: Logger) async -> [String: String]

    /// The gateway has stopped: remove what was made for this run only.
    func stopped()
}

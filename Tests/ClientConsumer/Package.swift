// swift-tools-version:6.2
import PackageDescription

/// An app's-eye view of the kit: a package outside it that depends on `Client/` by path, as the iOS app does (by path
/// in a monorepo, or by URL once `Client/` is published as a repository of its own; docs/app-integration.md), and
/// uses only its public API (no `@testable`). `make test` builds and runs it: a symbol the app needs cannot lose its
/// `public` unnoticed, and `DependencyGraphTests` fails if resolving the kit ever pulls in anything of the server.
let package = Package(
    name: "client-consumer",
    platforms: [.macOS(.v14), .iOS(.v17)],
    dependencies: [
        .package(name: "caregiver-push-client", path: "../../Client")
    ],
    targets: [
        .testTarget(
            name: "ClientConsumerTests",
            dependencies: [.product(name: "CaregiverPushClient", package: "caregiver-push-client")],
            swiftSettings: [.treatAllWarnings(as: .error), .enableUpcomingFeature("ExistentialAny")]
        )
    ]
)

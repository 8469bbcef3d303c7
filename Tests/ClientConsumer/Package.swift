// swift-tools-version:6.2
import PackageDescription

/// An app's-eye view of the kit: a package outside it that depends on `Client/` and uses only its public API (no
/// `@testable`). `make test` builds it both ways an app adds the kit (docs/app-integration.md):
/// - by path (a monorepo or a submodule), the default here: the kit is compiled as the app's own code, so the script
///   builds it with `-Xswiftc -warnings-as-errors`, as an app that holds itself to no warnings would;
/// - by URL (`Client/` published as a repository of its own): with `CLIENT_KIT_URL` set to a git repository made from
///   the working tree, built with `-Xswiftc -suppress-warnings`, as Xcode builds a package it resolved remotely.
/// Either way a symbol the app needs cannot lose its `public` unnoticed, and `DependencyGraphTests` fails if resolving
/// the kit ever pulls in anything of the server. No warning setting here: each build passes its own.
let kit: Package.Dependency =
    if let url = Context.environment["CLIENT_KIT_URL"], !url.isEmpty {
        .package(url: url, branch: "main")
    } else {
        .package(name: "caregiver-push-client", path: "../../Client")
    }

let package = Package(
    name: "client-consumer",
    platforms: [.macOS(.v14), .iOS(.v17)],
    dependencies: [kit],
    targets: [
        .testTarget(
            name: "ClientConsumerTests",
            dependencies: [.product(name: "CaregiverPushClient", package: "caregiver-push-client")],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        )
    ]
)

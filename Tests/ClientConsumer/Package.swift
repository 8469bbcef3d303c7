// swift-tools-version:6.2
import PackageDescription

/// An app's-eye view of `CaregiverPushClient`: a package outside the root one that depends on it by path, as the iOS
/// app depends on it by URL, and uses only its public API (no `@testable`). `make test` builds and runs it, so a
/// symbol the app needs cannot lose its `public` unnoticed.
let package = Package(
    name: "client-consumer",
    platforms: [.macOS(.v15), .iOS(.v17)],
    dependencies: [
        .package(name: "caregiver-push", path: "../..")
    ],
    targets: [
        .testTarget(
            name: "ClientConsumerTests",
            dependencies: [.product(name: "CaregiverPushClient", package: "caregiver-push")],
            swiftSettings: [.treatAllWarnings(as: .error), .enableUpcomingFeature("ExistentialAny")]
        )
    ]
)

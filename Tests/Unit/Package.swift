// swift-tools-version:6.2
import PackageDescription

/// The unit kind of test (`make test-unit`): the domain with no database, no process and no server framework —
/// token verification, validation, dose rules, the message text, configuration and secrets, the delivery run over a
/// scripted transport, the fuzz regressions. A package of its own so that building it builds only the domain and
/// the platform: the root package's test bundle links the gateway, the runner's emulators and Hummingbird/NIO.
let strict: [SwiftSetting] = [
    .treatAllWarnings(as: .error),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "caregiver-push-unit",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "caregiver-push", path: "../.."),
        .package(name: "caregiver-push-platform", path: "../../Shared/Platform"),
        // Already a dependency of the root package (same requirement).
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    ],
    targets: [
        .testTarget(
            name: "UnitTests",
            dependencies: [
                .product(name: "CaregiverPush", package: "caregiver-push"),
                .product(name: "TestFixtures", package: "caregiver-push"),
                .product(name: "Codecs", package: "caregiver-push-platform"),
                .product(name: "Curl", package: "caregiver-push-platform"),
                .product(name: "OpenSSLCrypto", package: "caregiver-push-platform"),
                .product(name: "JOSE", package: "caregiver-push-platform"),
                .product(name: "FunctionRuntime", package: "caregiver-push-platform"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        )
    ]
)

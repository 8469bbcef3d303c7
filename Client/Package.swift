// swift-tools-version:6.2
import PackageDescription

/// The caregiver's iOS app kit: what the app adds through SwiftPM. It depends on nothing of the server (no
/// Hummingbird, NIO, libpq…): Foundation (FoundationNetworking on Linux) and Observation only. The server package
/// uses `PushPayloadContract` from here by path, so the push's `data` keys have one definition.
let strict: [SwiftSetting] = [
    .treatAllWarnings(as: .error),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "caregiver-push-client",
    // The catalog's source language: the app is Japanese; English is the second language.
    defaultLocalization: "ja",
    platforms: [.iOS(.v17), .macOS(.v14)],
    products: [
        .library(name: "CaregiverPushClient", targets: ["CaregiverPushClient"]),
        // The push payload's keys and slots, shared with the server's message builder.
        .library(name: "PushPayloadContract", targets: ["PushPayloadContract"]),
    ],
    targets: [
        .target(name: "PushPayloadContract", path: "PushPayloadContract", swiftSettings: strict),
        .target(
            name: "CaregiverPushClient",
            dependencies: ["PushPayloadContract"],
            path: "CaregiverPushClient",
            // Xcode compiles the catalog into ja.lproj/en.lproj; SwiftPM on Linux copies it as it is, and
            // `CaregiverPushStrings` reads it there (see that type).
            resources: [.process("Resources/Localizable.xcstrings")],
            swiftSettings: strict
        ),
        // Unit tests and the end-to-end tests against the server's runner, PostgreSQL and FCM emulator. Those take
        // the built binaries' directory (FUNCTIONS_BIN_DIR) and DATABASE_URL from the environment: scripts/test.sh
        // sets both; without them they fail (CAREGIVER_PUSH_KIT_UNIT_ONLY=1 skips them on purpose, e.g. on a Mac
        // without the server built).
        .testTarget(
            name: "CaregiverPushClientTests",
            dependencies: ["CaregiverPushClient"],
            path: "Tests/CaregiverPushClientTests",
            swiftSettings: strict
        ),
    ]
)

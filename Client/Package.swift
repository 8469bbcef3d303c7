// swift-tools-version:6.2
import PackageDescription

/// The caregiver's iOS app kit: what the app adds through SwiftPM. It depends on nothing of the server (no
/// Hummingbird, NIO, libpq…): Foundation (FoundationNetworking on Linux) and Observation only. The server package
/// uses `PushPayloadContract` from here by path, so the push's `data` keys have one definition.
///
/// No warning setting here: an app's build decides what a warning does. Xcode builds a package it resolved by URL
/// with `-suppress-warnings`, which a `-warnings-as-errors` of the package's own conflicts with, and a package added
/// by path would fail the app's build on any warning Apple's SDK alone produces. The kit's own CI holds it to no
/// warnings from the command line instead (scripts/test.sh builds it with `-Xswiftc -warnings-as-errors`).
let settings: [SwiftSetting] = [.enableUpcomingFeature("ExistentialAny")]

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
        .target(name: "PushPayloadContract", path: "PushPayloadContract", swiftSettings: settings),
        .target(
            name: "CaregiverPushClient",
            dependencies: ["PushPayloadContract"],
            path: "CaregiverPushClient",
            // Xcode compiles the catalog into ja.lproj/en.lproj; SwiftPM on Linux copies it as it is, and
            // `CaregiverPushStrings` reads it there (see that type).
            resources: [.process("Resources/Localizable.xcstrings")],
            swiftSettings: settings
        ),
        // The phone's pieces stood in (permission, FCM token, store, clock, the API) and loopback sockets, shared by
        // both test targets. In no product: nothing of it reaches an app.
        .target(
            name: "CaregiverPushClientTestSupport",
            dependencies: ["CaregiverPushClient"],
            path: "Tests/Support",
            swiftSettings: settings
        ),
        // The kit's own tests, server-free: they build and run wherever the kit does (Linux, macOS 14, an iOS 17
        // simulator), with no child process and nothing newer than the platforms above.
        .testTarget(
            name: "CaregiverPushClientTests",
            dependencies: ["CaregiverPushClient", "CaregiverPushClientTestSupport"],
            path: "Tests/CaregiverPushClientTests",
            swiftSettings: settings
        ),
    ]
)

// End to end against the server's runner, PostgreSQL and FCM emulator: Linux only, where the server is built (they
// start its executables with Foundation.Process, which iOS lacks); on a Mac or in Xcode the target does not exist.
// They take the built binaries' directory (FUNCTIONS_BIN_DIR) and DATABASE_URL from the environment, which
// scripts/test.sh sets; without them they fail, saying so.
#if os(Linux)
    package.targets.append(
        .testTarget(
            name: "CaregiverPushClientEndToEndTests",
            dependencies: ["CaregiverPushClient", "CaregiverPushClientTestSupport"],
            path: "Tests/CaregiverPushClientEndToEndTests",
            swiftSettings: settings
        )
    )
#endif

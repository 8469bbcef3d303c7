// swift-tools-version:6.2
import PackageDescription

/// Our own targets build in Swift 6 mode with every warning an error; dependencies keep their own settings.
let strict: [SwiftSetting] = [
    .treatAllWarnings(as: .error),
    .enableUpcomingFeature("ExistentialAny"),
]

/// One executable per function: the product name is the function name the host and `infra/functions.json` use.
let functions: [(product: String, target: String)] = [
    ("push-register", "PushRegister"),
    ("push-unregister", "PushUnregister"),
    ("dose-record", "DoseRecord"),
    ("slot-bulk-record", "SlotBulkRecord"),
    ("prn-record", "PrnRecord"),
    ("push-sweep", "PushSweep"),
    // Deploy time only: the CloudFormation custom resource that migrates (no route, no schedule; not in the table).
    ("db-migrate", "DbMigrate"),
]

let package = Package(
    name: "caregiver-push",
    // iOS is for the app's `CaregiverPushClient` (iOS 17+); the server's targets only ever build on Linux and macOS.
    platforms: [.macOS(.v15), .iOS(.v17)],
    products: functions.map { .executable(name: $0.product, targets: [$0.target]) } + [
        .executable(name: "runner", targets: ["Runner"]),
        .executable(name: "bench", targets: ["Benchmarks"]),
        .library(name: "CaregiverPush", targets: ["CaregiverPush"]),
        // What the caregiver's iOS app adds through SwiftPM: deep links, the push toggle, token lifecycle, API client.
        .library(name: "CaregiverPushClient", targets: ["CaregiverPushClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        // The FCM emulator's TLS + HTTP/2 mode (ALPN h2), as fcm.googleapis.com serves: runner and tests only.
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
    ],
    targets: [
        .systemLibrary(name: "CLibpq", path: "Shared/C/CLibpq", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(
            name: "CCurl", path: "Shared/C/CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(
            name: "COpenSSL", path: "Shared/C/COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        // prlimit(2) for the host's per-function memory limit (Swift's Glibc module does not expose it).
        .target(name: "CProcessLimits", path: "Shared/C/CProcessLimits"),
        .target(
            name: "CaregiverPush",
            dependencies: [
                "CLibpq", "CCurl", "COpenSSL", "CProcessLimits",
                .product(name: "Logging", package: "swift-log"),
                "PushPayloadContract",
            ],
            path: "Shared",
            exclude: ["C"],
            swiftSettings: strict
        ),
        // The push payload's slot enum, `data` keys and `type`: the one definition the server's message builder and
        // the app's deep-link router share. Foundation-free, so the app pays nothing for it.
        .target(name: "PushPayloadContract", path: "Client/PushPayloadContract", swiftSettings: strict),
        // The app side. Depends on nothing of the server's: Foundation (FoundationNetworking on Linux) and Observation.
        .target(
            name: "CaregiverPushClient",
            dependencies: ["PushPayloadContract"],
            path: "Client/CaregiverPushClient",
            swiftSettings: strict
        ),
        .target(
            name: "FCMEmulator",
            dependencies: [
                "CaregiverPush",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "runner/FCMEmulator",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "Runner",
            dependencies: [
                "CaregiverPush",
                "FCMEmulator",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
            ],
            path: "runner",
            exclude: ["FCMEmulator"],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "Benchmarks",
            dependencies: [
                "CaregiverPush",
                "FCMEmulator",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/Benchmarks",
            // The Python peer of the fan-out benchmark, run as a child process from scripts/bench.sh's venv; the C
            // floors of the start-up section, which scripts/bench.sh builds with cc.
            exclude: ["peer", "c"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "CaregiverPushTests",
            dependencies: [
                "CaregiverPush",
                "CaregiverPushClient",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/CaregiverPushTests",
            swiftSettings: strict
        ),
    ]
        + functions.map {
            .executableTarget(
                name: $0.target, dependencies: ["CaregiverPush"], path: "Functions/\($0.target)", swiftSettings: strict)
        }
)

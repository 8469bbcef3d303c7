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
    // Deploy time only: the CloudFormation custom resource that migrates (no route, no schedule; `"deploy"` in the
    // table). FunctionListTests holds this list equal to infra/functions.json, names and order.
    ("db-migrate", "DbMigrate"),
]

let logging: Target.Dependency = .product(name: "Logging", package: "swift-log")

let package = Package(
    name: "caregiver-push",
    // The server's targets build on Linux and macOS; the app's kit is its own package (Client/Package.swift).
    platforms: [.macOS(.v15)],
    products: functions.map { .executable(name: $0.product, targets: [$0.target]) } + [
        // The production host the image ships (serve, migrate), and the developer's tool on top of it.
        .executable(name: "gateway", targets: ["GatewayCommand"]),
        .executable(name: "runner", targets: ["Runner"]),
        .executable(name: "bench", targets: ["Benchmarks"]),
        // The domain layer with the layers under it, for the fuzz package (Tests/Fuzz), which imports several.
        .library(
            name: "CaregiverPush",
            targets: ["Codecs", "Libpq", "Curl", "OpenSSLCrypto", "JOSE", "FunctionRuntime", "CaregiverPush"]),
    ],
    dependencies: [
        // The app kit (Client/Package.swift): the server uses its `PushPayloadContract` (the push's `data` keys and
        // slots), so the message builder and the app's router share one definition. The kit depends on nothing here.
        .package(name: "caregiver-push-client", path: "Client"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        // The FCM emulator's TLS + HTTP/2 mode (ALPN h2), as fcm.googleapis.com serves: runner and tests only.
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        // The runner's child processes (Shared/ProcessSupervision: FunctionProcess, ChildProcess's async run).
        .package(url: "https://github.com/swiftlang/swift-subprocess.git", from: "1.0.2"),
    ],
    targets: [
        .systemLibrary(name: "CLibpq", path: "Shared/C/CLibpq", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // libcurl's headers only: Shared/C/CCurl/ccurl.c loads libcurl.so.4 with dlopen on the first HTTP request.
        .target(name: "CCurl", path: "Shared/C/CCurl"),
        .systemLibrary(
            name: "COpenSSL", path: "Shared/C/COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        // prlimit(2) for the host's per-function memory limit (Swift's Glibc module does not expose it).
        .target(name: "CProcessLimits", path: "Shared/C/CProcessLimits"),
        // The layers, bottom to top (docs/architecture.md). Each target names only what it uses; none re-exports another.
        // Functions link Codecs … CaregiverPush, all on FoundationEssentials; ProcessSupervision and Migrations are above.
        .target(name: "Codecs", path: "Shared/Codecs", swiftSettings: strict),
        .target(
            name: "Libpq", dependencies: ["CLibpq", "Codecs", logging], path: "Shared/Libpq", swiftSettings: strict),
        .target(name: "Curl", dependencies: ["CCurl", "Codecs"], path: "Shared/Curl", swiftSettings: strict),
        .target(
            name: "OpenSSLCrypto", dependencies: ["COpenSSL", "Codecs"], path: "Shared/OpenSSLCrypto",
            swiftSettings: strict),
        .target(
            name: "JOSE", dependencies: ["Codecs", "OpenSSLCrypto", logging], path: "Shared/JOSE", swiftSettings: strict
        ),
        .target(
            name: "FunctionRuntime", dependencies: ["Codecs", "Curl", logging], path: "Shared/FunctionRuntime",
            swiftSettings: strict),
        .target(
            name: "CaregiverPush",
            dependencies: [
                "Codecs", "Libpq", "Curl", "OpenSSLCrypto", "JOSE", "FunctionRuntime", "Migrations", logging,
                .product(name: "PushPayloadContract", package: "caregiver-push-client"),
            ],
            path: "Shared/CaregiverPush",
            swiftSettings: strict
        ),
        // The migrator and the schema's data contract: `gateway migrate`, the domain's `db-migrate` custom resource and
        // the tests. No domain code: the gateway links it.
        .target(
            name: "Migrations",
            dependencies: ["Libpq", logging],
            path: "Shared/Migrations",
            swiftSettings: strict
        ),
        // Runner and tests only: process supervision and the function table (full Foundation is fine here).
        .target(
            name: "ProcessSupervision",
            dependencies: [
                "CProcessLimits", .product(name: "Subprocess", package: "swift-subprocess"),
            ],
            path: "Shared/ProcessSupervision",
            swiftSettings: strict
        ),
        .target(
            name: "FCMEmulator",
            dependencies: [
                "Codecs", "OpenSSLCrypto", "JOSE",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "runner/FCMEmulator",
            swiftSettings: strict
        ),
        // The production host (Gateway/): routing, the private Runtime API, the warm pools, the edge's limits, the
        // scheduler. It knows the function table and FunctionRuntime's event and problem types, not the domain: no
        // CaregiverPush, JOSE, Libpq, Migrations or FCMEmulator (the runner adds the emulator through
        // `GatewayExtension`).
        .target(
            name: "FunctionGateway",
            dependencies: [
                "Codecs", "OpenSSLCrypto", "FunctionRuntime", "ProcessSupervision",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
            ],
            path: "Gateway/FunctionGateway",
            swiftSettings: strict
        ),
        // `serve`'s options and `migrate`, shared by the `gateway` executable and the `runner` tool.
        .target(
            name: "GatewayCommands",
            dependencies: [
                "Libpq", "FunctionRuntime", "Migrations", "ProcessSupervision", "FunctionGateway",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Gateway/GatewayCommands",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "GatewayCommand",
            dependencies: ["GatewayCommands", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Gateway/GatewayCommand",
            swiftSettings: strict
        ),
        // The developer's tool: dev stack, seed data, tokens, the watcher, the emulators; `serve` is the gateway's.
        .executableTarget(
            name: "Runner",
            dependencies: [
                "Codecs", "Libpq", "OpenSSLCrypto", "JOSE", "FunctionRuntime", "CaregiverPush", "Migrations",
                "ProcessSupervision", "FunctionGateway", "GatewayCommands", "FCMEmulator",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "runner",
            exclude: ["FCMEmulator"],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "Benchmarks",
            dependencies: [
                "Codecs", "Libpq", "Curl", "OpenSSLCrypto", "JOSE", "FunctionRuntime", "CaregiverPush", "Migrations",
                "ProcessSupervision",
                "FCMEmulator",
                // nghttpx in front of the emulator, as the system tests start it.
                "TestSupport",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/Benchmarks",
            // The Python peer of the fan-out benchmark, run as a child process from scripts/bench.sh's venv; the C
            // floors of the start-up section, which scripts/bench.sh builds with cc; the dependency probes, packages
            // of their own built by hand (docs/decisions.md).
            exclude: ["peer", "c", "probes"],
            swiftSettings: strict
        ),
        // pipe2(2) for TestSupport's ProcessBurst (a burst of children that must not inherit each other's pipes).
        .target(name: "CTestSupport", path: "Tests/CTestSupport"),
        // Test support shared by the test targets below: the throwaway database, seeds, the built executables, the
        // FCM/JWKS/secrets fakes, the leak capture. A plain target so the test targets can share it; only they use it.
        .target(
            name: "TestSupport",
            dependencies: [
                "Codecs", "Libpq", "Curl", "OpenSSLCrypto", "JOSE", "FunctionRuntime", "CaregiverPush", "Migrations",
                "ProcessSupervision", "CTestSupport", "FCMEmulator", .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/TestSupport",
            swiftSettings: strict
        ),
        // Tests by kind (docs/development.md#tests says which to run for what). All of them share one test bundle
        // on Linux; `swift test --filter '^UnitTests\.'` runs one kind.
        // No database, no process: JSON, validation, JOSE, dose rules, configuration, the kit's contract, fuzz
        // regressions. Runs in seconds.
        .testTarget(
            name: "UnitTests",
            dependencies: [
                "Codecs", "Curl", "OpenSSLCrypto", "JOSE", "FunctionRuntime", "CaregiverPush", "ProcessSupervision",
                "TestSupport",
                // The gateway's event builder, read back by the functions' own strict parser (GatewayEventTests).
                "FunctionGateway", .product(name: "HTTPTypes", package: "swift-http-types"),
                // The gateway's options, parsed as `gateway serve` parses them (ClientAddressTests).
                "GatewayCommands", .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // The kit's router and catalog, read against the server's message builder (KitContractTests).
                .product(name: "CaregiverPushClient", package: "caregiver-push-client"),
                .product(name: "PushPayloadContract", package: "caregiver-push-client"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/UnitTests",
            swiftSettings: strict
        ),
        // The handlers and Libpq in-process against the test command's PostgreSQL.
        .testTarget(
            name: "DatabaseTests",
            dependencies: [
                "Codecs", "Libpq", "Curl", "OpenSSLCrypto", "JOSE", "FunctionRuntime", "CaregiverPush", "Migrations",
                "FCMEmulator", "TestSupport", .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/DatabaseTests",
            swiftSettings: strict
        ),
        // The gateway (`runner serve`) as a process in front of script functions or the real ones.
        .testTarget(
            name: "GatewayTests",
            dependencies: ["Codecs", "Curl", "OpenSSLCrypto", "CaregiverPush", "ProcessSupervision", "TestSupport"],
            path: "Tests/GatewayTests",
            swiftSettings: strict
        ),
        // The built executables through stdin/stdout and the Runtime API; the dev stack; the link layering.
        .testTarget(
            name: "SystemTests",
            dependencies: [
                "Codecs", "Libpq", "Curl", "OpenSSLCrypto", "JOSE", "FunctionRuntime", "CaregiverPush", "Migrations",
                "ProcessSupervision", "TestSupport", .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/SystemTests",
            swiftSettings: strict
        ),
        // Load and faults against the runner and PostgreSQL (fixed ports: one at a time on a machine).
        .testTarget(
            name: "LoadTests",
            dependencies: [
                "Codecs", "Libpq", "OpenSSLCrypto", "CaregiverPush", "Migrations", "TestSupport",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/LoadTests",
            swiftSettings: strict
        ),
    ]
        + functions.map {
            .executableTarget(
                name: $0.target,
                // db-migrate also applies the schema; every other function knows only the domain layer.
                dependencies: $0.target == "DbMigrate" ? ["CaregiverPush", "FunctionRuntime"] : ["CaregiverPush"],
                path: "Functions/\($0.target)", swiftSettings: strict)
        }
)

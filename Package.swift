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

/// A module of the platform package (Shared/Platform).
func platform(_ module: String) -> Target.Dependency { .product(name: module, package: "caregiver-push-platform") }

let package = Package(
    name: "caregiver-push",
    // The server's targets build on Linux and macOS; the app's kit is its own package (Client/Package.swift).
    platforms: [.macOS(.v15)],
    products: functions.map { .executable(name: $0.product, targets: [$0.target]) } + [
        // The production host the image ships (serve, migrate), and the developer's tool on top of it.
        .executable(name: "gateway", targets: ["GatewayCommand"]),
        .executable(name: "runner", targets: ["Runner"]),
        .executable(name: "bench", targets: ["Benchmarks"]),
        // The domain layer and the migrator, for the fuzz package (Tests/Fuzz), which takes the platform's modules
        // from the platform package.
        .library(name: "CaregiverPush", targets: ["CaregiverPush", "Migrations"]),
        // The tests' fixtures, for the unit kind's package (Tests/Unit), which cannot reach this package's test support.
        .library(name: "TestFixtures", targets: ["TestFixtures"]),
    ],
    dependencies: [
        // The app kit (Client/Package.swift): the server uses its `PushPayloadContract` (the push's `data` keys and
        // slots), so the message builder and the app's router share one definition. The kit depends on nothing here.
        .package(name: "caregiver-push-client", path: "Client"),
        // The platform: codecs, the libpq, libcurl and OpenSSL bindings, JOSE and the function runtime (Shared/Platform).
        .package(name: "caregiver-push-platform", path: "Shared/Platform"),
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
        // prlimit(2) for the host's per-function memory limit (Swift's Glibc module does not expose it).
        .target(name: "CProcessLimits", path: "Shared/C/CProcessLimits"),
        // The Swift runtime's global-executor hook at its linked address, for a gateway with the runtime linked in.
        .target(name: "CExecutorHook", path: "Gateway/CExecutorHook"),
        // NIO's event loops as Swift's executor in every build of the hosts: the thin layer over that hook.
        .target(
            name: "ExecutorTakeover",
            dependencies: [
                "CExecutorHook", .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Gateway/ExecutorTakeover",
            swiftSettings: strict
        ),
        // The service's own layers, on the platform's (Shared/Platform, a package of its own: docs/architecture.md).
        // Each target names only what it uses; none re-exports another. The domain and the migrator are on
        // FoundationEssentials; ProcessSupervision and the hosts are above.
        .target(
            name: "CaregiverPush",
            dependencies: [
                platform("Codecs"), platform("Libpq"), platform("Curl"), platform("OpenSSLCrypto"), platform("JOSE"),
                platform("FunctionRuntime"), "Migrations", logging,
                .product(name: "PushPayloadContract", package: "caregiver-push-client"),
            ],
            path: "Shared/CaregiverPush",
            swiftSettings: strict
        ),
        // The migrator and the schema's data contract: `gateway migrate`, the domain's `db-migrate` custom resource and
        // the tests. No domain code: the gateway links it.
        .target(
            name: "Migrations",
            dependencies: [platform("Libpq"), logging],
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
                platform("Codecs"), platform("OpenSSLCrypto"), platform("JOSE"),
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
                platform("Codecs"), platform("OpenSSLCrypto"), platform("FunctionRuntime"), "ProcessSupervision",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
            ],
            path: "Gateway/FunctionGateway",
            swiftSettings: strict
        ),
        // `serve`'s options and `migrate`, shared by the `gateway` executable and the `runner` tool.
        .target(
            name: "GatewayCommands",
            dependencies: [
                platform("Libpq"), platform("FunctionRuntime"), "Migrations", "ProcessSupervision", "FunctionGateway",
                "ExecutorTakeover",
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
                platform("Codecs"), platform("Libpq"), platform("OpenSSLCrypto"), platform("JOSE"),
                platform("FunctionRuntime"), "CaregiverPush", "Migrations",
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
                platform("Codecs"), platform("Libpq"), platform("Curl"), platform("OpenSSLCrypto"), platform("JOSE"),
                platform("FunctionRuntime"), "CaregiverPush", "Migrations",
                "ProcessSupervision",
                "FCMEmulator",
                // nghttpx in front of the emulator, as the system tests start it.
                "TestSupport", "TestFixtures",
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
        // Fixtures every kind of test uses, the unit kind's package (Tests/Unit) included: the repository's root,
        // the tokens and key sets of the tests. No database, no process, no server framework.
        .target(
            name: "TestFixtures",
            dependencies: [platform("Codecs"), platform("OpenSSLCrypto"), platform("JOSE"), "CaregiverPush"],
            path: "Tests/TestFixtures",
            swiftSettings: strict
        ),
        // Test support shared by the test targets below: the throwaway database, seeds, the built executables, the
        // FCM/JWKS/secrets fakes, the leak capture. A plain target so the test targets can share it; only they use it.
        .target(
            name: "TestSupport",
            dependencies: [
                platform("Codecs"), platform("Libpq"), platform("Curl"), platform("OpenSSLCrypto"), platform("JOSE"),
                platform("FunctionRuntime"), "CaregiverPush", "Migrations", "ProcessSupervision", "CTestSupport",
                "FCMEmulator", "TestFixtures", logging,
            ],
            path: "Tests/TestSupport",
            swiftSettings: strict
        ),
        // Tests by kind (docs/development.md#tests says which to run for what). All of them share one test bundle
        // on Linux; `swift test --filter '^DatabaseTests\.'` runs one kind. The unit kind (no database, no process,
        // no server framework) is a package of its own (Tests/Unit), beside the platform's own tests
        // (Shared/Platform): `make test-unit` builds neither Hummingbird nor NIO.
        // The handlers and Libpq in-process against the test command's PostgreSQL.
        .testTarget(
            name: "DatabaseTests",
            dependencies: [
                platform("Codecs"), platform("Libpq"), platform("Curl"), platform("OpenSSLCrypto"), platform("JOSE"),
                platform("FunctionRuntime"), "CaregiverPush", "Migrations", "FCMEmulator", "TestSupport",
                "TestFixtures",
                logging,
            ],
            path: "Tests/DatabaseTests",
            swiftSettings: strict
        ),
        // The gateway (`runner serve`) as a process in front of script functions or the real ones; the gateway's
        // own parts in-process (its event builder, its options, the function table, the warm pools' sizes).
        .testTarget(
            name: "GatewayTests",
            dependencies: [
                platform("Codecs"), platform("Curl"), platform("OpenSSLCrypto"), platform("FunctionRuntime"),
                "CaregiverPush", "ProcessSupervision", "TestSupport", "TestFixtures",
                // The gateway's event builder, read back by the functions' own strict parser (GatewayEventTests).
                "FunctionGateway", .product(name: "HTTPTypes", package: "swift-http-types"),
                // The gateway's options, parsed as `gateway serve` parses them (ClientAddressTests).
                "GatewayCommands", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tests/GatewayTests",
            swiftSettings: strict
        ),
        // The built executables through stdin/stdout and the Runtime API; the dev stack; the link layering; the
        // repository's own checks (docs, SQL, manifest, the kit's contract).
        .testTarget(
            name: "SystemTests",
            dependencies: [
                platform("Codecs"), platform("Libpq"), platform("Curl"), platform("OpenSSLCrypto"), platform("JOSE"),
                platform("FunctionRuntime"), "CaregiverPush", "Migrations", "ProcessSupervision", "TestSupport",
                "TestFixtures", logging,
                // The kit's router and catalog, read against the server's message builder (KitContractTests).
                .product(name: "CaregiverPushClient", package: "caregiver-push-client"),
                .product(name: "PushPayloadContract", package: "caregiver-push-client"),
            ],
            path: "Tests/SystemTests",
            swiftSettings: strict
        ),
        // Load and faults against the runner and PostgreSQL (fixed ports: one at a time on a machine).
        .testTarget(
            name: "LoadTests",
            dependencies: [
                platform("Codecs"), platform("Libpq"), platform("OpenSSLCrypto"), "CaregiverPush", "Migrations",
                "TestSupport", "TestFixtures", logging,
            ],
            path: "Tests/LoadTests",
            swiftSettings: strict
        ),
    ]
        + functions.map {
            .executableTarget(
                name: $0.target,
                // db-migrate also applies the schema; every other function knows only the domain layer.
                dependencies: $0.target == "DbMigrate"
                    ? ["CaregiverPush", platform("FunctionRuntime")] : ["CaregiverPush"],
                path: "Functions/\($0.target)", swiftSettings: strict)
        }
)

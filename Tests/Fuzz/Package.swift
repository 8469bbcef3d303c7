// swift-tools-version:6.2
import PackageDescription

/// libFuzzer harnesses for the code that reads untrusted bytes: the invocation event and request body, caregiver
/// JWTs, and the endpoints' body validation. `scripts/fuzz.sh` (`make fuzz`) builds them with
/// `-sanitize=fuzzer,address -parse-as-library` into `.build-fuzz` and runs each for a bounded time.
///
/// A package of its own, because every target in it is compiled with the fuzzer's instrumentation and entry point,
/// which the root package's executables and tests must not be. The checks live in `FuzzChecks`, a file the unit
/// package's `FuzzRegressionTests` (Tests/Unit) compiles too (through a symbolic link), so its `swift test` replays
/// every seed and regression input with the same assertions, without libFuzzer.
let strict: [SwiftSetting] = [
    .treatAllWarnings(as: .error),
    .enableUpcomingFeature("ExistentialAny"),
]

/// One executable per fuzz target; the product name is the target name `scripts/fuzz.sh` and `Corpus/` use.
let harnesses: [(product: String, target: String)] = [
    ("envelope", "FuzzEnvelope"),
    ("token-verifier", "FuzzTokenVerifier"),
    ("validators", "FuzzValidators"),
]

let package = Package(
    name: "caregiver-push-fuzz",
    platforms: [.macOS(.v15)],
    products: harnesses.map { .executable(name: $0.product, targets: [$0.target]) },
    dependencies: [
        .package(name: "caregiver-push", path: "../.."),
        .package(name: "caregiver-push-platform", path: "../../Shared/Platform"),
        // Already a dependency of the root package (same requirement); named here only to build a silent Logger.
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    ],
    targets: [
        .systemLibrary(name: "CLibFuzzer"),
        .target(
            name: "FuzzChecks",
            dependencies: [
                .product(name: "CaregiverPush", package: "caregiver-push"),
                .product(name: "Codecs", package: "caregiver-push-platform"),
                .product(name: "OpenSSLCrypto", package: "caregiver-push-platform"),
                .product(name: "JOSE", package: "caregiver-push-platform"),
                .product(name: "FunctionRuntime", package: "caregiver-push-platform"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
    ]
        + harnesses.map {
            .executableTarget(name: $0.target, dependencies: ["FuzzChecks", "CLibFuzzer"], swiftSettings: strict)
        }
)

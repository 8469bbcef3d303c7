// swift-tools-version:6.2
import PackageDescription

/// The platform the service's functions stand on, and nothing of the service: JSON and encodings (Codecs), the thin
/// bindings to libpq, libcurl and OpenSSL, JOSE (JWS, JWK sets) and the function runtime (the host, the API Gateway
/// shapes, problems, logging, the secrets extension). The service (the root package) depends on it; it depends on
/// nothing of the service's. Its own tests (PlatformTests) need no database, no process and no server framework.
let strict: [SwiftSetting] = [
    .treatAllWarnings(as: .error),
    .enableUpcomingFeature("ExistentialAny"),
]

let logging: Target.Dependency = .product(name: "Logging", package: "swift-log")

/// The modules, bottom to top (docs/architecture.md): each names only what it uses; none re-exports another.
let modules = ["Codecs", "Libpq", "Curl", "OpenSSLCrypto", "JOSE", "FunctionRuntime"]

let package = Package(
    name: "caregiver-push-platform",
    platforms: [.macOS(.v15)],
    products: modules.map { .library(name: $0, targets: [$0]) },
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2")
    ],
    targets: [
        .systemLibrary(name: "CLibpq", path: "C/CLibpq", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // libcurl's headers only: C/CCurl/ccurl.c loads libcurl.so.4 with dlopen on the first HTTP request.
        .target(name: "CCurl", path: "C/CCurl"),
        .systemLibrary(name: "COpenSSL", path: "C/COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .target(name: "Codecs", path: "Codecs", swiftSettings: strict),
        .target(name: "Libpq", dependencies: ["CLibpq", "Codecs", logging], path: "Libpq", swiftSettings: strict),
        .target(name: "Curl", dependencies: ["CCurl", "Codecs"], path: "Curl", swiftSettings: strict),
        .target(
            name: "OpenSSLCrypto", dependencies: ["COpenSSL", "Codecs"], path: "OpenSSLCrypto", swiftSettings: strict),
        .target(name: "JOSE", dependencies: ["Codecs", "OpenSSLCrypto", logging], path: "JOSE", swiftSettings: strict),
        .target(
            name: "FunctionRuntime", dependencies: ["Codecs", "Curl", logging], path: "FunctionRuntime",
            swiftSettings: strict),
        .testTarget(
            name: "PlatformTests", dependencies: ["Codecs", "Curl", "OpenSSLCrypto", "JOSE", "FunctionRuntime"],
            swiftSettings: strict),
    ]
)

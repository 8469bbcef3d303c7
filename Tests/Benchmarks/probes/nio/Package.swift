// swift-tools-version:6.0
// Not part of the project's build (Package.swift excludes Tests/Benchmarks/probes): the probe behind
// docs/decisions.md's "The functions bind libpq, libcurl and OpenSSL directly". push-register's work — verify an HS256
// JWT, connect to PostgreSQL, upsert the device, answer — on postgres-nio and jwt-kit, built as the functions are
// (`swift build -c release --static-swift-stdlib --product probe-register`), to measure against the shipped function.
import PackageDescription

let package = Package(
    name: "probe-nio",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/vapor/postgres-nio.git", exact: "1.33.2"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.0.0"),
    ],
    targets: [
        .executableTarget(
            name: "probe-register",
            dependencies: [
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ])
    ]
)

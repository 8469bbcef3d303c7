// swift-tools-version:6.0
// The Swift floors of the start-up section's peak-RSS rows (docs/benchmarks.md, "CPU and page faults per
// invocation"): what any statically linked Swift executable keeps resident, and what FoundationEssentials' JSON adds.
// scripts/bench.sh builds them as the functions are built (release, --static-swift-stdlib, stripped); make test does
// not build them.
import PackageDescription

let package = Package(
    name: "rss-probes",
    targets: [
        .executableTarget(name: "swift-trivial", path: "Sources/swift-trivial"),
        .executableTarget(name: "swift-json", path: "Sources/swift-json"),
    ]
)

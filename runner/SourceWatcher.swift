import ProcessSupervision
import Foundation
import Logging

/// Watches source directories (by modification time, four times a second) and rebuilds the functions when a file
/// changes, then calls `reload` so that warm workers restart on the new binaries (cold ones pick them up anyway).
///
/// Only what the change can affect is built: an edit under `Functions/<Target>/` rebuilds that one function; an
/// edit under `Shared/` or `Client/` rebuilds every function, one `swift build --product` at a time, the most
/// recently invoked first, each put to use (`reload`) as soon as it is linked rather than after the last.
struct SourceWatcher: Sendable {
    let directories: [String]
    let logger: Logger
    /// The functions invoked lately, most recent first: the ones a developer is trying are rebuilt first.
    let recentlyInvoked: @Sendable () -> [String]
    let reload: @Sendable () async -> Void

    init(
        directories: [String], logger: Logger, recentlyInvoked: @escaping @Sendable () -> [String] = { [] },
        reload: @escaping @Sendable () async -> Void
    ) {
        // Through links (a checkout made of links to another's sources) to the files themselves.
        self.directories = directories.map { URL(fileURLWithPath: $0).resolvingSymlinksInPath().path }
        self.logger = logger
        self.recentlyInvoked = recentlyInvoked
        self.reload = reload
    }

    /// The package the watched sources belong to: where `swift build` runs (the directory `Package.swift` is in,
    /// through a link).
    static var packageDirectory: String {
        URL(fileURLWithPath: "Package.swift").resolvingSymlinksInPath().deletingLastPathComponent().path
    }

    /// What `runner dev` watches: the functions, the shared modules, and the app kit's contract the server uses.
    static let watched = ["Functions", "Shared", "Client"]

    /// The functions the gateway runs (routed and scheduled), from the function list, infra/functions.json.
    static let functions: [String] =
        (try? FunctionTable(contentsOf: URL(fileURLWithPath: packageDirectory + "/infra/functions.json")))?.functions
        .filter { $0.deploy == nil }.map(\.name) ?? []

    func run() async {
        var known = modificationTimes()
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(250))
            var current = modificationTimes()
            guard current != known else { continue }
            // Let an editor finish writing (a save may be several writes) before building.
            try? await Task.sleep(for: .milliseconds(150))
            current = modificationTimes()
            let changed = Set(current.keys).union(known.keys).filter { current[$0] != known[$0] }
            known = current
            let products = Self.ordered(Self.products(toRebuild: changed), recent: recentlyInvoked())
            logger.info(
                "source changed: rebuilding",
                metadata: [
                    "files": .stringConvertible(changed.count), "products": .string(products.joined(separator: ",")),
                ])
            let started = ContinuousClock.now
            if await rebuild(products) {
                logger.info(
                    "functions rebuilt",
                    metadata: ["duration_ms": .stringConvertible(Self.milliseconds(since: started))])
            } else {
                logger.error("rebuild failed: still serving the previous build (see the compiler output above)")
            }
        }
    }

    /// The function products a change of `paths` (relative, `Functions/DoseRecord/main.swift`) can affect.
    static func products(toRebuild paths: Set<String>) -> [String] {
        var own: [String] = []
        for path in paths.sorted() {
            let parts = path.split(separator: "/")
            guard parts.count >= 3, parts[0] == "Functions" else { return functions }
            let product = productName(ofTarget: String(parts[1]))
            // db-migrate is not served by `runner dev`; its own edits need no rebuild here.
            if functions.contains(product), !own.contains(product) { own.append(product) }
        }
        return own
    }

    /// `products` with the recently invoked ones first (most recent first), the rest in their order.
    static func ordered(_ products: [String], recent: [String]) -> [String] {
        var first: [String] = []
        for function in recent where products.contains(function) && !first.contains(function) { first.append(function) }
        return first + products.filter { !first.contains($0) }
    }

    static func milliseconds(since start: ContinuousClock.Instant) -> Int64 {
        let (seconds, attoseconds) = (ContinuousClock.now - start).components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    /// `SlotBulkRecord` → `slot-bulk-record` (Package.swift names each function's product so).
    static func productName(ofTarget target: String) -> String {
        var name = ""
        for character in target {
            if character.isUppercase, !name.isEmpty { name.append("-") }
            name.append(contentsOf: character.lowercased())
        }
        return name
    }

    private func modificationTimes() -> [String: Date] {
        var times: [String: Date] = [:]
        for directory in directories {
            guard let files = FileManager.default.enumerator(atPath: directory) else { continue }
            while let file = files.nextObject() as? String {
                guard file.hasSuffix(".swift") || file.hasSuffix(".h") || file.hasSuffix(".c") else { continue }
                // The app kit's own build and tests are not the server's.
                if directory.hasSuffix("/Client"), file.hasPrefix("Tests/") || file.hasPrefix(".build") { continue }
                let path = "\(URL(fileURLWithPath: directory).lastPathComponent)/\(file)"
                let full = "\(directory)/\(file)"
                let attributes = try? FileManager.default.attributesOfItem(atPath: full)
                if let modified = attributes?[.modificationDate] as? Date { times[path] = modified }
            }
        }
        return times
    }

    /// One `swift build --product` per function (SwiftPM builds only the last of several `--product` options), each
    /// put to use as soon as it is linked.
    private func rebuild(_ products: [String]) async -> Bool {
        let package = Self.packageDirectory
        for product in products {
            let started = ContinuousClock.now
            guard
                let result = try? await ChildProcess.run(
                    executable: URL(fileURLWithPath: "/usr/bin/env"),
                    arguments: ["swift", "build", "--package-path", package, "--product", product],
                    input: Data(), forwardStandardError: true)
            else { return false }
            FileHandle.standardError.write(result.standardOutput)
            guard result.exitStatus == 0 else { return false }
            logger.info(
                "function rebuilt: restarting its workers",
                metadata: [
                    "function": .string(product), "duration_ms": .stringConvertible(Self.milliseconds(since: started)),
                ])
            await reload()
        }
        return true
    }
}

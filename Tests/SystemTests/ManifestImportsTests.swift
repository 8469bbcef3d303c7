import Codecs
import Foundation
import ProcessSupervision
import Testing
import TestFixtures
import TestSupport

/// The module graph as the compiler cannot check it. `--explicit-target-dependency-import-check error` (on the build
/// `make test` runs) fails only on an import from outside a target's dependency closure; an import of a transitive
/// dependency, and a declared dependency nothing imports, pass it. This suite reads the manifest as SwiftPM
/// evaluates it (`swift package dump-package`: paths, excludes and the generated function targets expanded) and
/// every target's imports, and holds them equal both ways.
@Suite("manifest: each target imports exactly what it declares")
struct ManifestImportsTests {
    /// Modules of the toolchain and the platform, never declared as dependencies.
    static let systemModules: Set<String> = [
        "Foundation", "FoundationEssentials", "FoundationNetworking", "Glibc", "Musl", "Darwin", "Dispatch",
        "Synchronization", "Testing", "XCTest", "_Concurrency", "ucrt", "WinSDK",
    ]

    struct Target {
        let name: String
        let type: String
        let directory: URL
        let excluded: [URL]
        let declared: Set<String>
    }

    /// The service's packages: the root, the platform (Shared/Platform) and the unit kind (Tests/Unit).
    static let packages = ["", "Shared/Platform", "Tests/Unit"]

    /// Every target of every one of the service's packages.
    static func manifest() throws -> [Target] {
        try packages.flatMap { try manifest(of: $0) }
    }

    static func manifest(of package: String) throws -> [Target] {
        // A scratch path of its own: the `swift test` running this holds the lock on the checkout's `.build`.
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("dump-package-\(UUID())")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let packageRoot = package.isEmpty ? Repository.root : Repository.root.appendingPathComponent(package)
        let result = try ChildProcess.run(
            executable: URL(fileURLWithPath: "/usr/bin/env"),
            arguments: [
                "swift", "package", "--package-path", packageRoot.path, "--scratch-path", scratch.path,
                "dump-package",
            ],
            input: Data())
        try #require(
            result.exitStatus == 0,
            "swift package dump-package: \(String(decoding: result.standardError, as: UTF8.self))")
        let package = try JSONValue.parse(String(decoding: result.standardOutput, as: UTF8.self))
        return try (package["targets"]?.arrayValue ?? []).map { target in
            let name = try #require(target["name"]?.stringValue)
            let type = try #require(target["type"]?.stringValue)
            let defaultRoot = type == "test" ? "Tests" : "Sources"
            let path = target["path"]?.stringValue ?? "\(defaultRoot)/\(name)"
            let directory = packageRoot.appendingPathComponent(path)
            var declared: Set<String> = []
            for dependency in target["dependencies"]?.arrayValue ?? [] {
                // {"byName": [name, condition]}, {"target": [name, condition]}, {"product": [name, package, …]}:
                // a product's module is named as the product in every package this one uses.
                for kind in ["byName", "target", "product"] {
                    if let module = dependency[kind]?.arrayValue?.first?.stringValue { declared.insert(module) }
                }
            }
            let excluded = (target["exclude"]?.arrayValue ?? []).compactMap(\.stringValue).map {
                directory.appendingPathComponent($0)
            }
            return Target(name: name, type: type, directory: directory, excluded: excluded, declared: declared)
        }
    }

    /// The Swift files SwiftPM compiles for the target (symbolic links followed, excluded paths left out).
    static func sources(of target: Target) throws -> [URL] {
        let files = try #require(
            FileManager.default.enumerator(at: target.directory, includingPropertiesForKeys: nil))
        return files.compactMap { $0 as? URL }.filter { file in
            file.pathExtension == "swift"
                && !target.excluded.contains { file.standardizedFileURL.path.hasPrefix($0.standardizedFileURL.path) }
        }
    }

    /// `import M`, `@testable import M`, `public import M`, `import struct M.T`, `@preconcurrency import M.Sub`.
    /// Lines inside a multi-line string literal (the Python and shell scripts some tests embed) are not Swift.
    static func imports(in text: String) -> [(module: String, exported: Bool)] {
        var inLiteral = false
        return text.split(separator: "\n", omittingEmptySubsequences: false).compactMap { line in
            let delimiters = line.ranges(of: "\"\"\"").count
            defer { if delimiters % 2 == 1 { inLiteral.toggle() } }
            guard !inLiteral, delimiters == 0 else { return nil }
            var words = line.split(separator: " ").map(String.init)
            var exported = false
            while let first = words.first, Self.isModifier(first) {
                if first == "@_exported" { exported = true }
                words.removeFirst()
            }
            guard words.first == "import", words.count >= 2 else { return nil }
            let kinds: Set<String> = ["struct", "class", "enum", "protocol", "func", "var", "let", "typealias"]
            let path = kinds.contains(words[1]) && words.count >= 3 ? words[2] : words[1]
            return (String(path.split(separator: ".")[0]), exported)
        }
    }

    /// `@testable`, `@_exported`, `@preconcurrency`, `@_spi(X)`, an access level: what may stand before `import`.
    static func isModifier(_ word: String) -> Bool {
        ["public", "package", "internal"].contains(word)
            || word.wholeMatch(of: /@[A-Za-z_]+(\([A-Za-z_]*\))?/) != nil
    }

    static func importedModules(of target: Target) throws -> Set<String> {
        var modules: Set<String> = []
        for file in try sources(of: target) {
            for entry in imports(in: try String(contentsOf: file, encoding: .utf8)) { modules.insert(entry.module) }
        }
        return modules.subtracting(systemModules)
    }

    @Test("every target's imports are its declared dependencies, no more and no fewer")
    func importsEqualDeclarations() throws {
        let targets = try Self.manifest()
        // The walk is real: the domain, the functions and the test targets are all there.
        #expect(targets.contains { $0.name == "CaregiverPush" } && targets.contains { $0.name == "PushRegister" })
        #expect(targets.filter { $0.type == "test" }.count >= 6)
        var mismatches: [String] = []
        for target in targets where target.type != "system" {
            let imported = try Self.importedModules(of: target)
            let undeclared = imported.subtracting(target.declared).sorted()
            let unused = target.declared.subtracting(imported).sorted()
            if !undeclared.isEmpty { mismatches.append("\(target.name) imports undeclared \(undeclared)") }
            if !unused.isEmpty { mismatches.append("\(target.name) declares unused \(unused)") }
        }
        #expect(mismatches.isEmpty, "\(mismatches.joined(separator: "; "))")
    }

    @Test("@_exported appears only in the app kit (Client/), whose one import gives apps the payload contract")
    func noReexports() throws {
        var offenders: [String] = []
        var checked = 0
        for target in try Self.manifest() where target.type != "system" {
            for file in try Self.sources(of: target) {
                checked += 1
                if Self.imports(in: try String(contentsOf: file, encoding: .utf8)).contains(where: \.exported) {
                    offenders.append(file.lastPathComponent)
                }
            }
        }
        #expect(checked > 100)
        #expect(offenders.isEmpty, "@_exported in \(offenders)")
    }

    @Test("the import reader sees every form of import the sources use")
    func readsImports() {
        let quotes = String(repeating: "\"", count: 3)
        let text = [
            "import Codecs", "@testable import JOSE", "@preconcurrency import NIOCore",
            "public import struct Logging.Logger", "@_exported import PushPayloadContract", "// import Commented",
            #"@Test("the import reader")"#,
            "let importValue = 1", "let script = \(quotes)", "    import os, sys", "    \(quotes)",
            "import Synchronization",
        ].joined(separator: "\n")
        let found = Self.imports(in: text)
        #expect(
            found.map(\.module) == ["Codecs", "JOSE", "NIOCore", "Logging", "PushPayloadContract", "Synchronization"])
        #expect(found.map(\.exported) == [false, false, false, false, true, false])
    }

    @Test("the fuzz package compiles the same checks file as the tests: a symbolic link, not a copy")
    func fuzzChecksAreOneFile() throws {
        let link = Repository.root.appendingPathComponent("Tests/Fuzz/Sources/FuzzChecks/FuzzChecks.swift")
        let destination = try FileManager.default.destinationOfSymbolicLink(atPath: link.path)
        #expect(destination == "../../../Unit/Tests/UnitTests/Fuzz/FuzzChecks.swift")
        #expect(FileManager.default.fileExists(atPath: link.resolvingSymlinksInPath().path))
    }
}

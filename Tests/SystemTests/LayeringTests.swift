import ProcessSupervision
import Foundation
import Testing
import TestSupport

/// The functions are built on FoundationEssentials alone (for a fast cold start): full Foundation and its ICU data cost
/// a cold start ~12 ms and the zip tens of MiB. The target graph keeps `Foundation` out of every module a function
/// links; this checks the result on the built executables, whatever the graph says.
@Suite("functions link FoundationEssentials only")
struct LayeringTests {
    /// Every function executable: the function list, infra/functions.json (`FunctionListTests` checks it reads).
    static let functions: [String] =
        (try? FunctionTable(contentsOf: TestDatabase.repositoryRoot.appendingPathComponent("infra/functions.json")))?
        .functions.map(\.name) ?? []

    /// The libraries a function must not load, at any depth of its dependencies.
    static let forbidden = ["libFoundation.so", "lib_FoundationICU.so", "libFoundationInternationalization.so"]

    @Test("no built function depends on libFoundation or ICU", arguments: functions)
    func noFullFoundation(function: String) throws {
        let executable = Executables.binDirectory.appendingPathComponent(function)
        try #require(FileManager.default.isExecutableFile(atPath: executable.path), "build first: \(executable.path)")
        let result = try ChildProcess.run(
            executable: URL(fileURLWithPath: "/usr/bin/ldd"), arguments: [executable.path], input: Data())
        let listing = String(decoding: result.standardOutput, as: UTF8.self)
        try #require(result.exitStatus == 0, "ldd failed: \(String(decoding: result.standardError, as: UTF8.self))")
        // The listing is real: libpq is linked by every function (a static or unreadable binary would not say so).
        #expect(listing.contains("libpq.so"), "ldd listed no libpq: \(listing)")
        for library in Self.forbidden {
            #expect(!listing.contains(library), "\(function) loads \(library)")
        }
    }

    /// The modules the functions link, by folder: none imports `Foundation` (the runner-only `ProcessSupervision` may).
    @Test("no function-linked module imports Foundation")
    func noFoundationImport() throws {
        let root = TestDatabase.repositoryRoot
        let folders = [
            "Shared/Platform/Codecs", "Shared/Platform/Libpq", "Shared/Platform/Curl", "Shared/Platform/OpenSSLCrypto",
            "Shared/Platform/JOSE", "Shared/Platform/FunctionRuntime",
            "Shared/CaregiverPush", "Shared/Migrations", "Functions", "Client/PushPayloadContract",
        ]
        var checked = 0
        for folder in folders {
            let directory = root.appendingPathComponent(folder)
            let files = try #require(FileManager.default.enumerator(atPath: directory.path)).compactMap {
                $0 as? String
            }
            for file in files where file.hasSuffix(".swift") {
                let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
                checked += 1
                for line in text.split(separator: "\n")
                where line.hasPrefix("import ") || line.hasPrefix("@testable import ") {
                    let module = line.split(separator: " ").last.map(String.init) ?? ""
                    #expect(
                        !["Foundation", "FoundationNetworking", "FoundationInternationalization"].contains(module),
                        "\(folder)/\(file) imports \(module)")
                }
            }
        }
        #expect(checked > 50)
    }
}

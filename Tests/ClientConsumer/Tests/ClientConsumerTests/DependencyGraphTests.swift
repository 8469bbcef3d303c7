import Foundation
import Testing

/// Adding the kit must not pull the server in: the consumer's resolved dependency graph (SwiftPM's own
/// `show-dependencies`) holds the kit and nothing else, and the kit declares no dependency at all.
@Suite("the kit resolves alone")
struct DependencyGraphTests {
    static let consumer = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let kit = consumer.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Client")

    struct Node: Decodable {
        let identity: String
        let name: String
        let dependencies: [Node]

        var all: [Node] { dependencies.flatMap { [$0] + $0.all } }
    }

    /// `swift package show-dependencies --format json` for `package`, in a scratch directory of its own (the outer
    /// `swift test` holds the consumer's).
    static func graph(of package: URL) throws -> Node {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("consumer-graph-\(UUID())")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "swift", "package", "--package-path", package.path, "--scratch-path", scratch.path, "show-dependencies",
            "--format", "json",
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        // Anything SwiftPM prints before the JSON (a fetch line) is skipped.
        let json = data.drop { $0 != UInt8(ascii: "{") }
        return try JSONDecoder().decode(Node.self, from: Data(json))
    }

    @Test("the app-like consumer resolves the kit and nothing else: no Hummingbird, NIO, swift-log, subprocess…")
    func consumerResolvesOnlyTheKit() throws {
        let root = try Self.graph(of: Self.consumer)
        #expect(root.dependencies.map(\.name) == ["caregiver-push-client"])
        // By path the kit's identity is its directory's name; by URL (CLIENT_KIT_URL), the repository's.
        let remote = ProcessInfo.processInfo.environment["CLIENT_KIT_URL"].map { !$0.isEmpty } ?? false
        #expect(root.all.map(\.identity) == [remote ? "caregiver-push-client" : "client"])
        let server = [
            "caregiver-push", "hummingbird", "swift-nio", "swift-log", "swift-subprocess", "swift-argument-parser",
        ]
        #expect(root.all.filter { server.contains($0.name) || server.contains($0.identity) }.isEmpty)
    }

    @Test("the kit's own manifest declares no dependency")
    func kitDeclaresNone() throws {
        let kit = try Self.graph(of: Self.kit)
        #expect(kit.name == "caregiver-push-client" && kit.dependencies.isEmpty)
    }
}

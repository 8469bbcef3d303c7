import Foundation
import Testing
import TestFixtures
import TestSupport

/// `JSONCoding` is the one JSON encoder configuration of the server (keys sorted, `/` unescaped): responses, logs,
/// metrics, JWTs, FCM messages, the custom resource's answer and the runner's events and problems. An encoder
/// configured by hand beside it could drift from it unnoticed.
@Suite("JSONCoding is the one encoder configuration")
struct JSONCodingUseTests {
    /// The server's production code (the app kit in `Client/` is a package of its own with its own needs).
    static let directories = ["Shared", "Gateway", "runner", "Functions"]
    static let owner = "Shared/Platform/Codecs/JSON/JSONCoding.swift"

    @Test("no production Swift file but JSONCoding.swift makes a JSONEncoder")
    func oneEncoder() throws {
        var checked = 0
        var offenders: [String] = []
        for directory in Self.directories {
            let root = Repository.root.appendingPathComponent(directory)
            let files = try #require(FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil))
            for case let file as URL in files where file.pathExtension == "swift" {
                let path = file.path.replacingOccurrences(of: Repository.root.path + "/", with: "")
                checked += 1
                guard path != Self.owner else { continue }
                if try String(contentsOf: file, encoding: .utf8).contains("JSONEncoder()") { offenders.append(path) }
            }
        }
        // The walk is real: it read the owner and the functions' sources.
        #expect(checked > 100, "only \(checked) Swift files found under \(Self.directories)")
        #expect(
            try String(
                contentsOf: Repository.root.appendingPathComponent(Self.owner), encoding: .utf8
            ).contains("JSONEncoder()"))
        #expect(offenders.isEmpty, "JSONEncoder configured outside JSONCoding: \(offenders)")
    }
}

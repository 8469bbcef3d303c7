import Foundation
import Testing
import TestFixtures
import TestSupport

/// Every statement the shipped code sends names its tables with the project's schema (docs/deploy.md#the-database):
/// a role's `search_path` can then neither hide a table nor put someone else's `patients` in its place. The migration
/// files are the exception: the migrator pins `search_path` to the schema while it applies them.
@Suite("SQL names the schema")
struct QualifiedSQLTests {
    static let tables = ProjectSchema.relations

    @Test("no unqualified table after FROM, JOIN, INTO, UPDATE or TABLE in Shared/, Gateway/ or runner/")
    func qualified() throws {
        let pattern = try Regex(
            #"(\b(FROM|JOIN|INTO|UPDATE|TABLE)\s+|,\s*)("# + Self.tables.joined(separator: "|")
                + #")\b(?![.:])"#)
        var unqualified: [String] = []
        var scanned = 0
        for directory in ["Shared", "Gateway", "runner"] {
            let root = Repository.root.appendingPathComponent(directory)
            let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil)
            while let url = walker?.nextObject() as? URL {
                guard url.pathExtension == "swift" else { continue }
                scanned += 1
                let lines = try String(contentsOf: url, encoding: .utf8).split(
                    separator: "\n", omittingEmptySubsequences: false)
                for (number, line) in lines.enumerated()
                where !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") && line.contains(pattern) {
                    unqualified.append("\(url.path.dropFirst(Repository.root.path.count + 1)):\(number + 1)")
                }
            }
        }
        #expect(scanned > 50)
        #expect(unqualified.isEmpty, "\(unqualified)")
    }
}

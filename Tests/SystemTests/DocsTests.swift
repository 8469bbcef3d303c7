import Foundation
import Testing
import TestFixtures
import TestSupport

/// The repository's own documents hold together: the code cites `docs/behaviour.md` (never a document the repository
/// does not contain), every cited anchor exists, every relative link in the README and `docs/` leads somewhere, and
/// the README stays an index. Reads files only: no database, no process.
@Suite("docs")
struct DocsTests {
    static let root = Repository.root

    /// Folders never read: build output, local data and state, and notes kept outside the project.
    static let skippedFolders: Set<String> = [
        ".git", ".build", ".build-fuzz", ".data", ".swiftpm", "dist", "bench-out", "notes", "node_modules",
    ]

    /// Citations of documents the repository does not contain (spelt in two pieces so that this file is no hit).
    static let foreignCitations = ["SPEC" + " §", "SPEC" + ".md", "FCM" + "-NOTES", "AWS" + "-NOTES"]

    /// Every UTF-8 text file of the working tree outside ``skippedFolders``, by path relative to the root.
    static func textFiles() throws -> [(path: String, text: String)] {
        let manager = FileManager.default
        guard let walker = manager.enumerator(at: root, includingPropertiesForKeys: [.isDirectoryKey, .fileSizeKey])
        else { throw CocoaError(.fileReadUnknown) }
        var files: [(path: String, text: String)] = []
        for case let url as URL in walker {
            let values = try url.resourceValues(forKeys: [.isDirectoryKey, .fileSizeKey])
            if values.isDirectory == true {
                // `.build-lever-*`: scripts/bench.sh's lever builds, each a scratch path of its own.
                if skippedFolders.contains(url.lastPathComponent) || url.lastPathComponent.hasPrefix(".build-") {
                    walker.skipDescendants()
                }
                continue
            }
            guard (values.fileSize ?? 0) <= 2 * 1024 * 1024, let data = try? Data(contentsOf: url),
                !data.contains(0), let text = String(data: data, encoding: .utf8)
            else { continue }
            files.append((relativePath(url), text))
        }
        return files
    }

    static func relativePath(_ url: URL) -> String {
        let path = url.standardizedFileURL.path
        let prefix = root.standardizedFileURL.path + "/"
        return path.hasPrefix(prefix) ? String(path.dropFirst(prefix.count)) : path
    }

    static func read(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// The `id`s of the HTML anchors (`<a id="…">`) in a document.
    static func htmlAnchors(_ text: String) -> Set<String> {
        Set(text.matches(of: /<a id="([^"]+)">/).map { String($0.output.1) })
    }

    /// The anchors GitHub gives a document's headings: lower case, punctuation dropped, spaces as hyphens, and a
    /// repeated one numbered.
    static func headingAnchors(_ text: String) -> Set<String> {
        var anchors: Set<String> = []
        var seen: [String: Int] = [:]
        for line in withoutCodeBlocks(text).split(separator: "\n") where line.hasPrefix("#") {
            let title = line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces).lowercased()
            let slug = String(
                title.unicodeScalars.compactMap { scalar -> Character? in
                    if scalar == " " { return "-" }
                    if scalar == "-" || scalar == "_" || CharacterSet.alphanumerics.contains(scalar) {
                        return Character(scalar)
                    }
                    return nil
                })
            let count = seen[slug, default: 0]
            seen[slug] = count + 1
            anchors.insert(count == 0 ? slug : "\(slug)-\(count)")
        }
        return anchors
    }

    /// The text with fenced code blocks blanked out (their `](` is not a link, their `#` not a heading).
    static func withoutCodeBlocks(_ text: String) -> String {
        var inside = false
        return text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> Substring in
            if line.hasPrefix("```") {
                inside.toggle()
                return ""
            }
            return inside ? "" : line
        }.joined(separator: "\n")
    }

    /// The README and every Markdown file directly in `docs/`.
    static func documents() throws -> [String] {
        let docs = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)
        return ["README.md"] + docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/\($0)" }
    }

    @Test("no file cites a document the repository does not contain")
    func noForeignCitations() throws {
        let files = try Self.textFiles()
        #expect(files.contains { $0.path == "Package.swift" }, "the walk must reach the sources")
        let hits = files.flatMap { file in
            Self.foreignCitations.filter { file.text.contains($0) }.map { "\(file.path): \($0)" }
        }
        #expect(hits.isEmpty, "cite docs/behaviour.md#anchor instead: \(hits)")
    }

    /// A design document's task, story or requirement id, or an issue number: neither is in the repository, so a
    /// reader cannot follow it. The behaviour is named in the project's own words (a docs/behaviour.md anchor).
    static var outsideReference: Regex<Substring> {
        /\b(?:US\d+(?:-\d+)?|T\d{3}|(?:NFR|FR|SC)-\d{3})\b|\b[Ii]ssue #?\d+/
    }

    @Test("no document, and no comment in the sources and scripts, cites a task id or an issue number")
    func noOutsideReferences() throws {
        var hits: [String] = []
        for file in try Self.textFiles() {
            let all = file.text.split(separator: "\n")
            let comment: String
            if file.path.hasSuffix(".md") {
                comment = ""
            } else if file.path.hasSuffix(".swift") {
                comment = "//"
            } else if [".sh", ".py"].contains(where: file.path.hasSuffix) || file.path == "Makefile" {
                comment = "#"
            } else {
                continue
            }
            let lines = all.filter { $0.trimmingPrefix(while: \.isWhitespace).hasPrefix(comment) }
            for line in lines where line.contains(Self.outsideReference) {
                hits.append("\(file.path): \(line.trimmingPrefix(while: \.isWhitespace).prefix(100))")
            }
        }
        #expect(hits.isEmpty, "name the behaviour (a behaviour.md anchor) instead:\n\(hits.joined(separator: "\n"))")
    }

    @Test("every docs/behaviour.md#anchor cited anywhere, and every #anchor inside it, exists")
    func behaviourAnchorsResolve() throws {
        let behaviour = try Self.read("docs/behaviour.md")
        let anchors = Self.htmlAnchors(behaviour)
        #expect(anchors.count > 40, "docs/behaviour.md lost its anchors")
        var cited: [(path: String, anchor: String)] = []
        for file in try Self.textFiles() {
            for match in file.text.matches(of: /behaviour\.md#([A-Za-z0-9_-]+)/) {
                cited.append((file.path, String(match.output.1)))
            }
        }
        for match in Self.withoutCodeBlocks(behaviour).matches(of: /\]\(#([^)\s]+)\)/) {
            cited.append(("docs/behaviour.md", String(match.output.1)))
        }
        #expect(cited.filter { !$0.path.hasPrefix("docs/") }.count > 50, "the code no longer cites docs/behaviour.md")
        // `docs/behaviour.md#anchor` itself is how the documents name the form.
        let broken = cited.filter { $0.anchor != "anchor" && !anchors.contains($0.anchor) }
            .map { "\($0.path): #\($0.anchor)" }
        #expect(broken.isEmpty, "no such anchor in docs/behaviour.md: \(broken)")
    }

    @Test("every relative link in README.md and docs/*.md leads to a file, and to an anchor in it")
    func relativeLinksResolve() throws {
        var broken: [String] = []
        var checked = 0
        for document in try Self.documents() {
            let folder = Self.root.appendingPathComponent(document).deletingLastPathComponent()
            for match in Self.withoutCodeBlocks(try Self.read(document)).matches(of: /\]\(([^)\s]+)\)/) {
                let link = String(match.output.1)
                if link.contains("://") || link.hasPrefix("mailto:") { continue }
                let parts = link.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                let target =
                    parts[0].isEmpty
                    ? document : Self.relativePath(folder.appendingPathComponent(String(parts[0])).standardizedFileURL)
                checked += 1
                guard FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(target).path) else {
                    broken.append("\(document): \(link) (no file \(target))")
                    continue
                }
                guard parts.count == 2, target.hasSuffix(".md") else { continue }
                let text = try Self.read(target)
                let fragment = String(parts[1])
                if !Self.htmlAnchors(text).contains(fragment) && !Self.headingAnchors(text).contains(fragment) {
                    broken.append("\(document): \(link) (no anchor \(fragment) in \(target))")
                }
            }
        }
        #expect(checked > 20, "the links were not found")
        #expect(broken.isEmpty, "\(broken)")
    }

    /// The Swift targets the service's three manifests declare (the root's, the platform's and the unit kind's), the C
    /// shims and the generated function targets aside.
    static func packageTargets() throws -> Set<String> {
        var names: Set<String> = []
        for path in ["Package.swift", "Shared/Platform/Package.swift", "Tests/Unit/Package.swift"] {
            let manifest = try read(path)
            let declared = manifest.matches(of: /\.(?:target|executableTarget|testTarget)\(\s*name:\s*"([A-Za-z]+)"/)
            names.formUnion(declared.map { String($0.output.1) })
        }
        // The platform's modules are declared by name in a list it maps into targets.
        let platform = try read("Shared/Platform/Package.swift")
        if let list = platform.firstMatch(of: /let modules = \[([^\]]*)\]/) {
            names.formUnion(list.output.1.matches(of: /"([A-Za-z]+)"/).map { String($0.output.1) })
        }
        return names.filter { $0.wholeMatch(of: /C[A-Z].*/) == nil }
    }

    /// The names in the first column (`` | `Name` … ``) of architecture.md's tables headed `module` or `target`.
    static func documentedModules() throws -> Set<String> {
        var names: Set<String> = []
        var inModuleTable = false
        for line in try read("docs/architecture.md").split(separator: "\n", omittingEmptySubsequences: false) {
            guard line.hasPrefix("|") else {
                inModuleTable = false
                continue
            }
            if line.hasPrefix("| module |") || line.hasPrefix("| target |") { inModuleTable = true }
            if inModuleTable, let name = line.firstMatch(of: /^\| `([A-Za-z]+)`/) {
                names.insert(String(name.output.1))
            }
        }
        return names
    }

    @Test("architecture.md's module and test-target tables name every target of the three manifests, and only those")
    func moduleTablesMatchThePackage() throws {
        let targets = try Self.packageTargets()
        let documented = try Self.documentedModules()
        // The walk is real: both lists hold the domain, the gateway and the test targets.
        #expect(
            ["CaregiverPush", "FunctionGateway", "UnitTests", "TestSupport", "JOSE", "PlatformTests"].allSatisfy(
                targets.contains))
        #expect(targets.subtracting(documented).isEmpty, "not in architecture.md: \(targets.subtracting(documented))")
        // The app kit's contract module comes from the kit's own package (Client/), not from this manifest.
        let foreign = documented.subtracting(targets).subtracting(["PushPayloadContract"])
        #expect(foreign.isEmpty, "in architecture.md but no target of Package.swift: \(foreign)")
    }

    @Test("README.md stays an index: at most 170 lines")
    func readmeIsShort() throws {
        let lines = try Self.read("README.md").filter { $0 == "\n" }.count
        #expect(lines <= 170, "README.md has \(lines) lines; move reference text to docs/")
    }
}

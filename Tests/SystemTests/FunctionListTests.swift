import CaregiverPush
import ProcessSupervision
import Foundation
import Testing
import TestFixtures
import TestSupport

/// `infra/functions.json` is the one function list. What cannot be generated from it is checked against it here:
/// the manifest's products, each endpoint's own name and method, the push outbox's sources. (The release and image
/// scripts, the runner's watcher, the benchmarks and `LayeringTests` read the table itself; SAM and the OpenAPI
/// document are checked against it by Tests/Contract.)
@Suite("infra/functions.json is the function list")
struct FunctionListTests {
    /// The table's function names, in its order; empty when it cannot be read (``tableReads`` then fails).
    static let names: [String] = (try? table())?.functions.map(\.name) ?? []

    static func table() throws -> FunctionTable {
        try FunctionTable(contentsOf: Repository.root.appendingPathComponent("infra/functions.json"))
    }

    @Test("the table reads, and names the seven functions once each")
    func tableReads() throws {
        let table = try Self.table()
        #expect(table.functions.count == 7)
        #expect(Self.names.count == table.functions.count)
    }

    @Test("Package.swift's function products are exactly the table's functions, each with its Functions/ folder")
    func packageManifestMatchesTable() throws {
        let manifest = try String(
            contentsOf: Repository.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        // The `let functions` list: ("product", "Target") pairs, as scripts used to read them.
        let pairs = manifest.matches(of: /\("([a-z-]+)", "([A-Za-z]+)"\)/).map { (String($0.1), String($0.2)) }
        #expect(pairs.map(\.0) == Self.names, "Package.swift's function products are not infra/functions.json's")
        for (_, target) in pairs {
            let main = Repository.root.appendingPathComponent("Functions/\(target)/main.swift")
            #expect(FileManager.default.fileExists(atPath: main.path), "no \(main.path)")
        }
    }

    @Test("each endpoint and scheduled job names its table entry, with the same trigger")
    func endpointsNameTheirTableEntry() throws {
        let table = try Self.table()
        let endpoints: [any Endpoint] = [PushRegister(), PushUnregister(), DoseRecord(), SlotBulkRecord(), PrnRecord()]
        for endpoint in endpoints {
            let entry = try #require(table.function(named: endpoint.functionName), "\(endpoint.functionName)")
            #expect(entry.method == endpoint.method && entry.path != nil, "\(endpoint.functionName)'s route")
        }
        let sweep = try #require(table.function(named: PushSweep().functionName))
        #expect(sweep.schedule != nil && sweep.routeKey == nil)
        // Every function of the table is one of these, or the deploy-time migration.
        let named = Set(endpoints.map(\.functionName) + [PushSweep().functionName, "db-migrate"])
        #expect(named == Set(Self.names))
        #expect(table.function(named: "db-migrate")?.deploy == "customResource")
    }

    @Test("the domain's FunctionName cases are the table's functions, in its order")
    func functionNamesAreTheTable() {
        #expect(FunctionName.allCases.map(\.rawValue) == Self.names)
    }

    @Test("the push outbox's sources are the recording functions of the table")
    func outboxSourcesAreTableFunctions() {
        for source in [PushOutbox.Source.doseRecord, .slotBulkRecord, .prnRecord] {
            #expect(Self.names.contains(source.rawValue), "\(source.rawValue)")
        }
    }
}

import ProcessSupervision
@testable import FunctionGateway
import Foundation
import Testing
import TestFixtures
import TestSupport

/// What the image runs is what `infra/functions.json` says: `gateway serve` keeps as many warm workers per function as
/// the table's `concurrency` lets run at once, and `--warm-workers` only ever lowers that.
@Suite("warm pool size")
struct WarmPoolSizeTests {
    static func table() throws -> FunctionTable {
        try FunctionTable(contentsOf: Repository.root.appendingPathComponent("infra/functions.json"))
    }

    @Test("without --warm-workers every function of the table gets its concurrency in warm workers")
    func followsTheTable() throws {
        for function in try Self.table().functions {
            let size = GatewayServer.warmPoolSize(of: function, requested: nil)
            #expect(size == function.concurrency, "\(function.name)")
        }
    }

    @Test("--warm-workers lowers the pool, never raises it above the function's concurrency, and is at least one")
    func requestedIsACeiling() throws {
        for function in try Self.table().functions {
            #expect(GatewayServer.warmPoolSize(of: function, requested: 1) == 1)
            #expect(GatewayServer.warmPoolSize(of: function, requested: 1000) == function.concurrency)
            #expect(GatewayServer.warmPoolSize(of: function, requested: 0) == 1)
        }
    }

    @Test("the image's entrypoint starts the gateway without --warm-workers, so the table decides")
    func imageFollowsTheTable() throws {
        let dockerfile = try String(
            contentsOf: Repository.root.appendingPathComponent("infra/docker/Dockerfile"), encoding: .utf8)
        let entrypoint = try #require(dockerfile.split(separator: "\n").first { $0.hasPrefix("ENTRYPOINT") })
        #expect(entrypoint.contains("gateway serve") && entrypoint.contains("--mode warm"))
        #expect(!entrypoint.contains("--warm-workers"))
    }
}

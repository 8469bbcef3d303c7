import CaregiverPush
import Foundation
import Synchronization
import Testing

@Suite("local stack scripts")
struct DevStackTests {
    /// `runner dev` starts PostgreSQL through `scripts/pg.sh` with Foundation's `Process`, which learns that its child
    /// exited when a socket every descendant inherits is closed. A postmaster that kept it made `make dev` wait
    /// forever on a fresh clone (first start only: a running cluster is not started again).
    @Test("pg.sh start returns to a Foundation Process caller, and the server it started answers")
    func pgStartReturns() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dev-pg-\(UUID().uuidString)").path
        let script = TestDatabase.repositoryRoot.appendingPathComponent("scripts/pg.sh")
        let port = 25439
        defer {
            _ = try? ChildProcess.run(executable: script, arguments: ["stop", directory], input: Data())
            try? FileManager.default.removeItem(atPath: directory)
        }
        let finished = DispatchSemaphore(value: 0)
        let status = Mutex<Int32?>(nil)
        // On a thread of its own, so that a hang fails this test instead of stopping the whole run.
        Thread.detachNewThread {
            let result = try? ChildProcess.run(executable: script, arguments: ["start", directory, "\(port)"], input: Data())
            status.withLock { $0 = result?.exitStatus ?? -1 }
            finished.signal()
        }
        let returned = finished.wait(timeout: .now() + 120) == .success
        try #require(returned, "pg.sh start had not returned after 120 s")
        #expect(status.withLock { $0 } == 0)
        let connection = try PostgresConnection(url: "postgresql://postgres@127.0.0.1:\(port)/caregiver_push")
        defer { connection.close() }
        #expect(try connection.query("SELECT 1")[0].decode(Int.self, at: 0) == 1)
    }
}

import ProcessSupervision
import CaregiverPush
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A PgBouncer of the test's own (`scripts/pgbouncer.sh`, Debian's package) in transaction-pooling mode, in front
/// of a local PostgreSQL, on a free port. Stopped and removed by ``remove()``.
package final class OwnPgBouncer: Sendable {
    package let directory: String
    package let port: Int
    package let upstreamPort: Int
    package let poolSize: Int

    /// Whether Debian's `pgbouncer` is installed (`make test` installs it; a bare `swift test` may lack it).
    package static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: "/usr/sbin/pgbouncer") }

    /// - Parameters:
    ///   - upstreamPort: the PostgreSQL on 127.0.0.1 it pools (every database of it).
    ///   - poolSize: `default_pool_size`: server connections per database and user.
    ///   - maxClientConnections: `max_client_conn`.
    ///   - queryWaitTimeoutSeconds: `query_wait_timeout`: how long a client may wait for a server connection.
    ///   - users: the logins it knows, when not `postgres` and the runtime role.
    package init(
        upstreamPort: Int, poolSize: Int, maxClientConnections: Int = 1000, queryWaitTimeoutSeconds: Int = 30,
        users: [String]? = nil
    ) throws {
        directory =
            FileManager.default.temporaryDirectory.appendingPathComponent("own-pgbouncer-\(UUID().uuidString)")
            .path
        self.upstreamPort = upstreamPort
        self.poolSize = poolSize
        var environment = ProcessInfo.processInfo.environment
        environment["PGBOUNCER_QUERY_WAIT_TIMEOUT"] = String(queryWaitTimeoutSeconds)
        if let users { environment["PGBOUNCER_USERS"] = users.joined(separator: " ") }
        // A free port can be taken by someone else before PgBouncer binds it: try a few.
        var started: Int?
        for _ in 0..<5 {
            let candidate = try freeLocalPort()
            let result = try ChildProcess.run(
                executable: Self.script,
                arguments: [
                    "start", directory, "\(candidate)", "\(upstreamPort)", "\(poolSize)", "\(maxClientConnections)",
                ],
                environment: environment, input: Data())
            if result.exitStatus == 0 {
                started = candidate
                break
            }
        }
        guard let started else { throw PoolerError("PgBouncer did not start in front of port \(upstreamPort)") }
        port = started
    }

    package static let script = TestDatabase.repositoryRoot.appendingPathComponent("scripts/pgbouncer.sh")

    /// The URL of `database` through the pooler.
    package func url(database: String = "caregiver_push") -> String {
        "postgresql://postgres@127.0.0.1:\(port)/\(database)"
    }

    /// Rows of an admin console command (`SHOW CONFIG`, `SHOW POOLS`), through psql: the console speaks only the
    /// simple query protocol, and our connection layer always uses the extended one.
    package func admin(_ command: String) throws -> [[String]] {
        let psql = try Self.psql()
        let result = try ChildProcess.run(
            executable: URL(fileURLWithPath: psql),
            arguments: [
                "-h", "127.0.0.1", "-p", "\(port)", "-U", "postgres", "-d", "pgbouncer", "-qtA", "-F", "\t",
                "-c", command,
            ],
            input: Data())
        guard result.exitStatus == 0 else { throw PoolerError("pgbouncer console: \(command) failed") }
        return String(decoding: result.standardOutput, as: UTF8.self).split(separator: "\n").map {
            $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        }
    }

    /// The `SHOW STATS` row of one database, by column name.
    package func stats(database: String) throws -> [String: Int] {
        let psql = try Self.psql()
        let result = try ChildProcess.run(
            executable: URL(fileURLWithPath: psql),
            arguments: [
                "-h", "127.0.0.1", "-p", "\(port)", "-U", "postgres", "-d", "pgbouncer", "-qA", "-F", "\t",
                "-c", "SHOW STATS",
            ],
            input: Data())
        let lines = String(decoding: result.standardOutput, as: UTF8.self).split(separator: "\n").map {
            $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        }
        guard let header = lines.first, let row = lines.first(where: { $0.first == database }) else { return [:] }
        var values: [String: Int] = [:]
        for (name, value) in zip(header, row) { values[name] = Int(value) }
        return values
    }

    package func remove() {
        _ = try? ChildProcess.run(executable: Self.script, arguments: ["stop", directory], input: Data())
        try? FileManager.default.removeItem(atPath: directory)
    }

    private static func psql() throws -> String {
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        guard let newest = versions.compactMap(Int.init).max() else { throw PoolerError("psql is not installed") }
        return "/usr/lib/postgresql/\(newest)/bin/psql"
    }
}

package struct PoolerError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// A TCP port on 127.0.0.1 that nothing listens on right now (the kernel's pick for port 0).
package func freeLocalPort() throws -> Int {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw PoolerError("socket: errno \(errno)") }
    defer { _ = Glibc.close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard bound == 0 else { throw PoolerError("bind: errno \(errno)") }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let named = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
    }
    guard named == 0 else { throw PoolerError("getsockname: errno \(errno)") }
    return Int(UInt16(bigEndian: address.sin_port))
}

extension TestDatabase {
    /// The PostgreSQL server itself, also in the pooled pass (where `DATABASE_URL` is PgBouncer's): the test
    /// command sets `TEST_DIRECT_DATABASE_URL` then.
    package static var directURL: String {
        ProcessInfo.processInfo.environment["TEST_DIRECT_DATABASE_URL"] ?? url
    }

    package static var directPort: Int { URLComponents(string: directURL)?.port ?? 5432 }
}

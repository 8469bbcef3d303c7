import Libpq
import OpenSSLCrypto
import CaregiverPush
import Foundation

/// push-register's SQL with 1k and with 1M rows in `push_devices`, and the plans of every device query: "nothing
/// scans a table whose size grows with the number of users" (docs/behaviour.md#data-model).
struct DeviceTableBenchmark {
    struct Result {
        let rows: Int
        let medianMilliseconds: Double
    }

    let databaseURL: String
    let registrations: Int

    func run() throws -> (results: [Result], plans: [(query: String, plan: String)]) {
        let connection = try PostgresConnection(url: databaseURL)
        defer { connection.close() }
        var results: [Result] = []
        for target in [1_000, 1_000_000] {
            try fill(to: target, connection: connection)
            let rows = try connection.query("SELECT count(*) FROM push_devices")[0].decode(Int.self, at: 0)
            results.append(Result(rows: rows, medianMilliseconds: try measureRegistrations(connection)))
        }
        return (results, try plans(connection))
    }

    /// Tops `push_devices` up to `target` rows of random caregivers, in one statement.
    func fill(to target: Int, connection: PostgresConnection) throws {
        try Self.fill(to: target, connection: connection)
    }

    /// Tops `push_devices` up to `target` rows of random caregivers, in one statement (also the start-up section's
    /// cold measurement at two sizes).
    static func fill(to target: Int, connection: PostgresConnection) throws {
        let current = try connection.query("SELECT count(*) FROM push_devices")[0].decode(Int.self, at: 0)
        guard current < target else { return }
        try connection.query(
            """
            INSERT INTO push_devices (owner_type, owner_id, token, token_sha256, platform, environment, installation_id)
            SELECT 'CAREGIVER', gen_random_uuid(), t, sha256(convert_to(t, 'UTF8')), 'ios', 'DEV', 'install-' || g
            FROM (SELECT g, 'bulk-' || g || '-' || md5(g::text) AS t
                  FROM generate_series(\(current + 1)::int, \(target)::int) AS g) AS s
            """)
        try connection.query("ANALYZE push_devices")
    }

    /// Median of `registrations` register transactions (new caregiver, new token, an installation id).
    private func measureRegistrations(_ connection: PostgresConnection) throws -> Double {
        let registry = PushDeviceRegistry(connection: connection)
        var samples: [Double] = []
        for index in 0..<registrations {
            let start = ContinuousClock.now
            _ = try registry.register(
                .init(
                    token: "bench-register-\(UUID().uuidString)", platform: .ios, environment: .development,
                    installationID: "bench-install-\(index)"),
                caregiverID: UUID())
            let elapsed = ContinuousClock.now - start
            samples.append(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
        }
        return median(samples)
    }

    /// EXPLAIN of each device query with realistic parameters.
    private func plans(_ connection: PostgresConnection) throws -> [(query: String, plan: String)] {
        let owner = UUID()
        let token = "bulk-500000-\(UUID().uuidString)"
        let hash = PostgresBytes(SHA256.hash(Array(token.utf8)))
        let queries: [(String, PostgresQuery)] = [
            (
                "register: disable the owner's other devices of the installation",
                """
                EXPLAIN UPDATE push_devices SET is_enabled = false, disabled_reason = 'REPLACED'
                WHERE owner_type = 'CAREGIVER' AND owner_id = \(owner) AND installation_id = 'install-1' AND is_enabled
                """
            ),
            (
                "register: disable other owners' devices holding the token",
                """
                EXPLAIN UPDATE push_devices SET is_enabled = false, disabled_reason = 'TOKEN_REASSIGNED'
                WHERE token_sha256 = \(hash) AND token = \(token) AND is_enabled
                """
            ),
            (
                "unregister",
                """
                EXPLAIN UPDATE push_devices SET is_enabled = false, disabled_reason = 'USER_DISABLED'
                WHERE owner_type = 'CAREGIVER' AND owner_id = \(owner) AND token_sha256 = \(hash) AND token = \(token)
                  AND is_enabled
                """
            ),
            (
                "push: recipients of a patient",
                """
                EXPLAIN SELECT d.id, d.token FROM caregiver_patient_links l
                JOIN push_devices d ON d.owner_type = 'CAREGIVER' AND d.owner_id = l.caregiver_id
                 AND d.environment = 'DEV' AND d.is_enabled
                WHERE l.patient_id = \(UUID()) AND l.revoked_at IS NULL
                """
            ),
        ]
        return try queries.map { name, query in
            let plan = try connection.query(query).map { try $0.decode(String.self, at: 0) }.joined(separator: "\n")
            return (name, plan)
        }
    }
}

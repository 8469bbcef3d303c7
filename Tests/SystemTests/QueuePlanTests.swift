import Foundation
import Libpq
import Testing
import TestSupport

/// The queue functions find every row by key, whatever the session saw when it planned them
/// (docs/decisions.md#queue-functions): on a database whose tables hold a row or two — where a sequential scan is the
/// planner's own choice — the outbox, the lease and the outcomes, and the foreign-key checks their inserts fire,
/// scan no table of the schema whole.
@Suite("queue functions: look-ups by key")
struct QueuePlanTests {
    static let tables = ["push_deliveries", "push_events", "push_devices", "patients", "caregiver_patient_links"]

    /// Sequential scans of the schema's tables so far, by table, as this session's statistics report them once its
    /// own pending counts are flushed.
    static func sequentialScans(_ connection: PostgresConnection) throws -> [String: Int] {
        try connection.query("SELECT pg_stat_force_next_flush()")
        // The flush happens when the session goes idle: after this statement, before the next.
        try connection.query("SELECT 1")
        try connection.query("SELECT pg_stat_clear_snapshot()")
        var scans: [String: Int] = [:]
        for row in try connection.query(
            "SELECT relname::text, seq_scan FROM pg_stat_user_tables WHERE schemaname = 'caregiver_push'")
        {
            scans[try row.decode(String.self, at: 0)] = try row.decode(Int.self, at: 1)
        }
        return scans
    }

    @Test("on near-empty tables the outbox, the lease and the outcomes scan no table whole, nor do their key checks")
    func noSequentialScans() throws {
        let database = try DbMigrateTests.migratedDatabase()
        let connection = try PostgresConnection(url: database.url, applicationName: "caregiver-push-tests")
        defer { connection.close() }
        try connection.query("SET search_path = caregiver_push")
        let patient = try Seed.patient(connection)
        let caregiver = UUID()
        try Seed.link(connection, caregiver: caregiver, patient: patient)
        try Seed.registerDevice(makeDeviceToken(), caregiver: caregiver, connection: connection)
        try connection.query("ANALYZE")
        let before = try Self.sequentialScans(connection)

        let holder = UUID()
        func enqueue(_ key: String, heldBy: UUID?) throws -> PostgresRows {
            try connection.query(
                """
                SELECT * FROM caregiver_push.enqueue_dose_taken(
                    NULL, NULL, \(key), 'dose-record', \(patient.uuidString.lowercased()), '2026-02-11'::date,
                    'morning', NULL, true, now(), 'PATIENT', NULL, 'DEV', 270, 10, \(heldBy), 30)
                """)
        }
        // The recording's own lease, then its outcome; a second event queued for a later lease, then that lease.
        let leased = try enqueue("plan-a", heldBy: holder)
        try #require(leased.count == 1)
        let delivery = try leased[0].decode(UUID.self, at: 0)
        let recorded = try connection.query(
            """
            SELECT caregiver_push.record_push_outcomes(
                \(holder), ARRAY[\(delivery)]::uuid[], ARRAY['SENT'], ARRAY[1], ARRAY[NULL]::text[],
                ARRAY['projects/p/messages/1'], ARRAY[0]::bigint[], ARRAY[]::uuid[], ARRAY[]::text[])
            """)
        #expect(try recorded[0].decode(Int.self, at: 0) == 1)
        #expect(try enqueue("plan-b", heldBy: nil).count == 1)
        let later = try connection.query(
            "SELECT * FROM caregiver_push.lease_push_deliveries(NULL, \(UUID()), 100, 3600, 30)")
        #expect(later.count == 1)

        let after = try Self.sequentialScans(connection)
        for table in Self.tables {
            #expect(after[table] == before[table], "\(table): \(before[table] ?? -1) → \(after[table] ?? -1)")
        }
    }
}

import Libpq
import FoundationEssentials
import Logging

/// An operator's mapping of the household relations onto the app's own tables (docs/deploy.md#bring-your-own-tables):
/// SQL that defines, in schema `caregiver_push`, one view per relation the data contract says the app owns —
/// patients, caregiver links, patient sessions, medications, schedule times, dose and PRN records — over the tables
/// where the app keeps them. The functions then read the app's households and write into the app's dose tables, with
/// no copy.
///
/// Applied by the migrator in its transaction, after the migrations and before the contract check: a mapping that
/// breaks the contract is rolled back with everything else of the run.
struct AppMapping {
    let contract: DataContract
    let sql: String

    /// Replaces the household relations with the mapping's views, when the mapping is new or changed, and gives the
    /// outbox's patient id the type of the app's. The grants (``grantContractColumns(_:)``) follow the contract check.
    ///
    /// A household relation that is still the functions' own table is dropped only while it is empty: the mapping
    /// must never lose a row. An unchanged mapping (its SHA-256 is stored) is not applied again, so a deploy that
    /// changes nothing takes no lock on the views.
    func apply(_ connection: PostgresConnection, logger: Logger) throws {
        try connection.query(
            """
            CREATE TABLE IF NOT EXISTS caregiver_push.app_mapping (
                singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
                sha256 bytea NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now())
            """)
        let relations = contract.appRelations.map(\.name)
        let unchanged = try connection.query(
            """
            SELECT coalesce((SELECT sha256 = sha256(convert_to(\(sql), 'UTF8')) FROM caregiver_push.app_mapping), false)
               AND (SELECT count(*) FROM pg_catalog.pg_class
                    WHERE relnamespace = 'caregiver_push'::regnamespace AND relkind = 'v'
                      AND relname = ANY (\("{" + relations.joined(separator: ",") + "}")::text[])) = \(relations.count)
            """
        )[0].decode(Bool.self, at: 0)
        if !unchanged {
            logger.info(
                "applying the app mapping", metadata: ["migration.relations": .stringConvertible(relations.count)])
            try replaceRelations(connection, relations: relations)
            try connection.executeScript(PostgresQuery(unsafeSQL: sql))
            try connection.query(
                """
                INSERT INTO caregiver_push.app_mapping (sha256) VALUES (sha256(convert_to(\(sql), 'UTF8')))
                ON CONFLICT (singleton) DO UPDATE SET sha256 = excluded.sha256, applied_at = now()
                """)
        }
        try alignOutboxPatientID(connection)
    }

    /// Drops each household relation (the functions' empty table, or the last mapping's view) so that the mapping
    /// can create its own; `CASCADE` takes the outbox's foreign key to the functions' `patients` with it.
    private func replaceRelations(_ connection: PostgresConnection, relations: [String]) throws {
        for relation in relations.reversed() {
            let kind = try connection.query(
                """
                SELECT relkind::text FROM pg_catalog.pg_class
                WHERE relnamespace = 'caregiver_push'::regnamespace AND relname = \(relation)
                """
            ).single?.decode(String.self, at: 0)
            switch kind {
            case "r", "p":
                let holdsRows = try connection.query(
                    PostgresQuery(unsafeSQL: "SELECT EXISTS (SELECT 1 FROM caregiver_push.\(relation))")
                )[0].decode(Bool.self, at: 0)
                if holdsRows { throw MigrationError.householdTableNotEmpty("caregiver_push.\(relation)") }
                try connection.query(PostgresQuery(unsafeSQL: "DROP TABLE caregiver_push.\(relation) CASCADE"))
            case "v":
                try connection.query(PostgresQuery(unsafeSQL: "DROP VIEW caregiver_push.\(relation) CASCADE"))
            default:
                break
            }
        }
    }

    /// The outbox keeps the patient's id in the type of the app's (`uuid` or text), so that the senders' join of an
    /// event to its patient compares like with like and is served by the app's key.
    private func alignOutboxPatientID(_ connection: PostgresConnection) throws {
        let types = try connection.query(
            """
            SELECT format_type(p.atttypid, NULL), format_type(e.atttypid, NULL)
            FROM pg_catalog.pg_attribute p, pg_catalog.pg_attribute e
            WHERE p.attrelid = to_regclass('caregiver_push.patients') AND p.attname = 'id'
              AND e.attrelid = 'caregiver_push.push_events'::regclass AND e.attname = 'patient_id'
            """
        ).single
        guard let types else { return }  // no patients.id: the contract check names it
        let (apps, outbox) = try types.decode((String, String).self)
        guard apps != outbox, ["uuid", "text", "character varying"].contains(apps) else { return }
        try connection.query(
            PostgresQuery(
                unsafeSQL: """
                    ALTER TABLE caregiver_push.push_events
                        ALTER COLUMN patient_id TYPE \(apps) USING patient_id::text::\(apps)
                    """))
    }

    /// The runtime role reaches the mapped relations only through the contract's columns: `SELECT` on those it
    /// reads, `INSERT` on those it writes; nothing else of the views, and nothing of the app's tables themselves.
    func grantContractColumns(_ connection: PostgresConnection) throws {
        let role = Migrator.runtimeRole
        for relation in contract.appRelations {
            let name = "caregiver_push.\(relation.name)"
            var statements = ["REVOKE ALL ON \(name) FROM PUBLIC, \(role)"]
            statements.append(
                "GRANT SELECT (\(relation.columns.map(\.name).joined(separator: ", "))) ON \(name) TO \(role)")
            if !relation.insertedColumns.isEmpty {
                statements.append(
                    "GRANT INSERT (\(relation.insertedColumns.joined(separator: ", "))) ON \(name) TO \(role)")
            }
            try connection.executeScript(PostgresQuery(unsafeSQL: statements.joined(separator: "; ")))
        }
    }
}

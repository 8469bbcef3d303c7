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
///
/// A view runs with its owner's rights, so Postgres's row level security on the app's tables does not hold for a
/// reader of the view. The migrator therefore moves each of the operator's views into the schema
/// `caregiver_push_app` (granted to no one) and puts in its place, in `caregiver_push`, a guarded view over it: a
/// security barrier whose rows exist only for the runtime role and the schema's owner, with a check option refusing
/// any other role's insert. Exposed to the Data API by mistake, the schema then shows `anon` and `authenticated`
/// nothing of the app's households and lets them write nothing.
struct AppMapping {
    let contract: DataContract
    let sql: String

    /// Where the operator's own views are kept, behind the guarded views of `caregiver_push`.
    static let mappingSchema = "caregiver_push_app"

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
               AND (SELECT count(*) FROM pg_catalog.pg_class
                    WHERE relnamespace = to_regnamespace(\(Self.mappingSchema)) AND relkind = 'v'
                      AND relname = ANY (\("{" + relations.joined(separator: ",") + "}")::text[])) = \(relations.count)
            """
        )[0].decode(Bool.self, at: 0)
        if !unchanged {
            logger.info(
                "applying the app mapping", metadata: ["migration.relations": .stringConvertible(relations.count)])
            try replaceRelations(connection, relations: relations)
            try connection.executeScript(PostgresQuery(unsafeSQL: sql))
            try guardViews(connection, relations: relations)
            try connection.query(
                """
                INSERT INTO caregiver_push.app_mapping (sha256) VALUES (sha256(convert_to(\(sql), 'UTF8')))
                ON CONFLICT (singleton) DO UPDATE SET sha256 = excluded.sha256, applied_at = now()
                """)
        }
        let aligned = try alignOutboxPatientID(connection)
        if !unchanged || aligned { try recompileTypedFunctions(connection) }
    }

    /// The PL/pgSQL functions whose variables take the types of mapped columns (`%TYPE`: the outbox's
    /// `enqueue_dose_taken`, migration 000018, the recording's reads, migration 000021, and the recording calls
    /// of dose-record, slot-bulk-record and prn-record, migration 000022), by signature. A session compiles a function once, at its first call, and keeps the types
    /// it resolved then until the function's catalog row changes; rewriting the row (the same setting set again)
    /// makes every session compile it anew, with the types of the mapping just applied.
    static let typedFunctions = [
        """
        enqueue_dose_taken(text, text, text, text, text, date, text, text, boolean, timestamptz, text, uuid, text, \
        integer, integer, uuid, double precision)
        """,
        "find_patient_session(bytea, text)",
        "find_active_link(text, text)",
        "find_medication(text, text)",
        "find_dose_record(text, text, text)",
        "find_schedule_time(text, time)",
        "find_scheduled_doses(text, date)",
        "find_prn_record(text, text, text)",
        """
        record_dose(text, text, text, text, text, time, date, date, boolean, text, text, text, text, text, boolean, \
        timestamptz, text, uuid, text, integer, integer, uuid, double precision)
        """,
        """
        record_slot_doses(text, text[], text[], boolean[], text, text[], text, text, text, text, date, text, \
        timestamptz, text, uuid, text, integer, integer, uuid, double precision)
        """,
        """
        record_prn(text, text, integer, text, text, text, text, date, text, integer, text, text, text, text, text, \
        text, text, timestamptz, text, uuid, text, integer, integer, uuid, double precision)
        """,
    ]

    private func recompileTypedFunctions(_ connection: PostgresConnection) throws {
        for signature in Self.typedFunctions {
            try connection.query(
                PostgresQuery(
                    unsafeSQL: "ALTER FUNCTION caregiver_push.\(signature) SET search_path = pg_catalog, pg_temp"))
        }
    }

    /// Drops each household relation (the functions' empty table, or the last mapping's views) so that the mapping
    /// can create its own; `CASCADE` takes the outbox's foreign key to the functions' `patients` with it.
    private func replaceRelations(_ connection: PostgresConnection, relations: [String]) throws {
        try connection.executeScript(
            PostgresQuery(
                unsafeSQL: """
                    CREATE SCHEMA IF NOT EXISTS \(Self.mappingSchema);
                    REVOKE ALL ON SCHEMA \(Self.mappingSchema) FROM PUBLIC
                    """))
        for relation in relations.reversed() {
            try connection.query(
                PostgresQuery(unsafeSQL: "DROP VIEW IF EXISTS \(Self.mappingSchema).\(relation) CASCADE"))
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

    /// Moves each of the operator's views out of `caregiver_push` and guards it there (see the type's comment). A
    /// relation the mapping left out, or made as something else than a view, is left for the contract check to name.
    private func guardViews(_ connection: PostgresConnection, relations: [String]) throws {
        let owner = try connection.query("SELECT quote_literal(current_user)")[0].decode(String.self, at: 0)
        for relation in relations {
            let isView = try connection.query(
                """
                SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class
                               WHERE relnamespace = 'caregiver_push'::regnamespace AND relname = \(relation)
                                 AND relkind = 'v')
                """
            )[0].decode(Bool.self, at: 0)
            guard isView else { continue }
            try connection.executeScript(
                PostgresQuery(
                    unsafeSQL: """
                        ALTER VIEW caregiver_push.\(relation) SET SCHEMA \(Self.mappingSchema);
                        CREATE VIEW caregiver_push.\(relation) WITH (security_barrier) AS
                            SELECT * FROM \(Self.mappingSchema).\(relation)
                            WHERE current_user IN ('\(Migrator.runtimeRole)', \(owner))
                            WITH CASCADED CHECK OPTION
                        """))
            // What default privileges granted the operator's view at its creation, it keeps in its new schema.
            let grantees = try connection.query(
                """
                SELECT DISTINCT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE quote_ident(a.grantee::regrole::text) END
                FROM pg_catalog.pg_class c, aclexplode(c.relacl) a
                WHERE c.oid = to_regclass(\("\(Self.mappingSchema).\(relation)")) AND a.grantee <> c.relowner
                """
            ).map { try $0.decode(String.self, at: 0) }
            if !grantees.isEmpty {
                try connection.query(
                    PostgresQuery(
                        unsafeSQL: """
                            REVOKE ALL ON \(Self.mappingSchema).\(relation) FROM \(grantees.joined(separator: ", "))
                            """))
            }
        }
    }

    /// The outbox keeps the patient's id in the type of the app's (`uuid` or text), so that the senders' join of an
    /// event to its patient compares like with like and is served by the app's key.
    /// - Returns: whether the column's type changed.
    private func alignOutboxPatientID(_ connection: PostgresConnection) throws -> Bool {
        let types = try connection.query(
            """
            SELECT format_type(p.atttypid, NULL), format_type(e.atttypid, NULL)
            FROM pg_catalog.pg_attribute p, pg_catalog.pg_attribute e
            WHERE p.attrelid = to_regclass('caregiver_push.patients') AND p.attname = 'id'
              AND e.attrelid = 'caregiver_push.push_events'::regclass AND e.attname = 'patient_id'
            """
        ).single
        guard let types else { return false }  // no patients.id: the contract check names it
        let (apps, outbox) = try types.decode((String, String).self)
        guard apps != outbox, ["uuid", "text", "character varying"].contains(apps) else { return false }
        try connection.query(
            PostgresQuery(
                unsafeSQL: """
                    ALTER TABLE caregiver_push.push_events
                        ALTER COLUMN patient_id TYPE \(apps) USING patient_id::text::\(apps)
                    """))
        return true
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

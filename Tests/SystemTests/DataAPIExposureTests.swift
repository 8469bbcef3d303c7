import Codecs
import CaregiverPush
import Foundation
import Libpq
import Logging
import Migrations
import Testing
import TestFixtures
import TestSupport

/// The database as the docs deploy it (docs/deploy.md#the-database): what a Supabase project's Data API could reach.
///
/// PostgREST serves a project's exposed schemas to the roles `anon` (the publishable key every copy of the app
/// carries) and `authenticated` (any signed-in user): it runs each request as `SET LOCAL ROLE anon` (or
/// `authenticated`) with the caller's claims in `request.jwt.claims`. These tests do the same over every relation and
/// count what gets through. A PostgreSQL cluster of the test's own plays the Supabase project: its roles and, with the
/// project setting that grants new tables in `public` to the API roles on, those default privileges.
@Suite("closed to Supabase's Data API, least privilege", .serialized)
struct DataAPIExposureTests {
    /// The relations the migrations make (the history included).
    static let relations = ProjectSchema.relations

    /// A PostgreSQL cluster of the test's own, set up as a Supabase project (its roles, and the setting that grants
    /// new tables in `public` to the API roles on), not migrated yet; `body` gets its owner's connection.
    static func withSupabaseProject(_ body: (OwnDatabase, PostgresConnection) throws -> Void) throws {
        let cluster = try OwnDatabase(port: try freeLocalPort(), migrated: false)
        defer { cluster.remove() }
        let owner = try PostgresConnection(url: cluster.url)
        defer { owner.close() }
        try SupabaseProject.createRoles(owner)
        try SupabaseProject.grantNewTablesInPublic(owner)
        try body(cluster, owner)
    }

    @Test("an earlier version's database on Supabase: every relation exposed before, none after, data moved along")
    func legacyDatabaseMovesForward() throws {
        try Self.withSupabaseProject { cluster, owner in try Self.legacyDatabaseMovesForward(cluster, owner) }
    }

    static func legacyDatabaseMovesForward(_ cluster: OwnDatabase, _ owner: PostgresConnection) throws {
        // What the previous version's migrator did: the first three migrations in `public`, history beside them.
        try LegacyDeployment.migrate(owner)
        let household = try LegacyDeployment.fill(owner)
        let before = try Probe.run(owner, schema: "public", relations: Self.relations, caregiver: household.caregiver)
        print(Probe.report("before (an earlier version's database, Supabase's automatic grants on)", before))
        // Every relation readable and deletable by both API roles.
        #expect(Set(before.filter { $0.operation == .select }.map(\.relation)).count == Self.relations.count)
        #expect(Set(before.filter { $0.operation == .delete }.map(\.role)) == ["anon", "authenticated"])
        let counted = try Self.rowCounts(owner, schema: "public")

        try Migrator(directory: TestDatabase.migrationsDirectory).migrate(owner, logger: Logger(label: "tests"))
        try owner.query(PostgresQuery(unsafeSQL: "ALTER ROLE \(Migrator.runtimeRole) LOGIN"))
        // Every row moved along, but the clear-text access token, which the migration deletes.
        let moved = try Self.rowCounts(owner, schema: "caregiver_push")
        for relation in Self.relations where relation != "fcm_access_tokens" && relation != "schema_migrations" {
            #expect(moved[relation] == counted[relation], "\(relation)")
        }
        #expect(moved["fcm_access_tokens"] == 0)
        #expect(
            try owner.query("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")[0].decode(Int.self, at: 0)
                == 0)
        // The moved database serves the built functions, as the runtime role.
        try Self.record(runtimeURL: cluster.runtimeURL, owner: owner, caregiver: household.caregiver)
        // A project that exposes the schema by mistake, following Supabase's own steps for a custom schema.
        try SupabaseProject.exposeSchemaByMistake(owner, schema: "caregiver_push")
        let after = try Probe.run(
            owner, schema: "caregiver_push", relations: Self.relations, caregiver: household.caregiver)
        print(Probe.report("after (migrated forward, the schema then exposed by mistake)", after))
        #expect(after.isEmpty)
    }

    @Test("a new Supabase project: beside the app's own public.patients, nothing reachable, even exposed by mistake")
    func newSupabaseProject() throws {
        try Self.withSupabaseProject { cluster, owner in try Self.newSupabaseProject(cluster, owner) }
    }

    static func newSupabaseProject(_ cluster: OwnDatabase, _ owner: PostgresConnection) throws {
        try SupabaseProject.grantNewTablesEverywhere(owner)
        // The app's own tables of the same names, in `public`.
        try owner.executeScript(
            """
            CREATE TABLE public.patients (id bigint PRIMARY KEY, nickname text);
            INSERT INTO public.patients VALUES (1, 'x');
            CREATE TABLE public.medications (id bigint PRIMARY KEY);
            """)
        try Migrator(directory: TestDatabase.migrationsDirectory).migrate(owner, logger: Logger(label: "tests"))
        try owner.query(PostgresQuery(unsafeSQL: "ALTER ROLE \(Migrator.runtimeRole) LOGIN"))
        #expect(try owner.query("SELECT nickname FROM public.patients")[0].decode(String.self, at: 0) == "x")
        // Default privileges granted every new table to the API roles; the migrator took each grant back.
        let granted = try SupabaseProject.grants(owner, schema: "caregiver_push")
        print("DataAPIExposureTests: granted to the API roles and PUBLIC in caregiver_push: \(granted)")
        #expect(granted.isEmpty)
        let caregiver = UUID()
        try Self.record(runtimeURL: cluster.runtimeURL, owner: owner, caregiver: caregiver)
        let closed = try Probe.run(owner, schema: "caregiver_push", relations: Self.relations, caregiver: caregiver)
        print(Probe.report("a new Supabase project, automatic grants on", closed))
        #expect(closed.isEmpty)
        try SupabaseProject.exposeSchemaByMistake(owner, schema: "caregiver_push")
        let exposed = try Probe.run(owner, schema: "caregiver_push", relations: Self.relations, caregiver: caregiver)
        print(Probe.report("the same, its schema then exposed by mistake", exposed))
        #expect(exposed.isEmpty)
        try Self.truncateRefused(owner)
        try Self.registerRefusesAPIRoles(cluster, owner, caregiver: caregiver)
        try Self.queueFunctionsRefuseAPIRoles(owner)
        try Self.readFunctionsReadNothingForAPIRoles(owner)
        // The next migrator run takes back every role's defaults in the schema, the other role's included.
        #expect(try Self.outsidersDefaults(owner) > 0)
        try Migrator(directory: TestDatabase.migrationsDirectory).migrate(owner, logger: Logger(label: "tests"))
        #expect(try Self.outsidersDefaults(owner) == 0)
    }

    /// Granted TRUNCATE by the exposure, which row level security does not cover, no API role can empty a table: the
    /// lockdown put a trigger on each that refuses anyone but its owner.
    static func truncateRefused(_ owner: PostgresConnection) throws {
        let counts = try Self.rowCounts(owner, schema: "caregiver_push")
        #expect(counts.values.contains { $0 > 0 })
        for role in ["anon", "authenticated", "service_role"] {
            for relation in Self.relations {
                #expect(
                    try owner.query(
                        "SELECT has_table_privilege(\(role), \("caregiver_push." + relation), 'TRUNCATE')"
                    )[0].decode(Bool.self, at: 0), "the mistaken exposure grants TRUNCATE: the refusal is the trigger's"
                )
                try owner.query("BEGIN")
                defer { _ = try? owner.query("ROLLBACK") }
                try owner.query(PostgresQuery(unsafeSQL: "SET LOCAL ROLE \(role)"))
                let refusal = #expect(throws: PostgresError.self, "\(role) \(relation)") {
                    try owner.query(PostgresQuery(unsafeSQL: "TRUNCATE caregiver_push.\(relation) CASCADE"))
                }
                #expect(refusal?.sqlState?.rawValue == "42501", "\(String(describing: refusal))")
            }
        }
        #expect(try Self.rowCounts(owner, schema: "caregiver_push") == counts)
    }

    /// Default privileges in the schema that grant the API roles or PUBLIC anything, whoever's they are.
    static func outsidersDefaults(_ owner: PostgresConnection) throws -> Int {
        try owner.query(
            """
            SELECT count(*) FROM pg_default_acl d, aclexplode(d.defaclacl) a LEFT JOIN pg_roles r ON r.oid = a.grantee
            WHERE d.defaclnamespace = 'caregiver_push'::regnamespace
              AND (a.grantee = 0 OR r.rolname IN ('anon', 'authenticated', 'service_role'))
            """
        )[0].decode(Int.self, at: 0)
    }

    /// Exposed by mistake, the queue's functions (migrations 000017 and 000018) and the recording calls (000022) may be
    /// executed by the API roles too, and refuse them with their own 42501 before they read or write a row.
    static func queueFunctionsRefuseAPIRoles(_ owner: PostgresConnection) throws {
        let calls = [
            "lease_push_deliveries(text,uuid,integer,integer,double precision)":
                "SELECT count(*) FROM caregiver_push.lease_push_deliveries(NULL, gen_random_uuid(), 100, 3600, 15)",
            "enqueue_dose_taken(text,text,text,text,text,date,text,text,boolean,timestamptz,text,uuid,text,integer,integer,uuid,double precision)":
                """
            SELECT count(*) FROM caregiver_push.enqueue_dose_taken(
                NULL, NULL, 'probe', 'dose-record', gen_random_uuid()::text, current_date, 'morning', NULL, true,
                now(), 'PATIENT', NULL, 'DEV', 30, 10, NULL, 0)
            """,
            "record_dose(text,text,text,text,text,time,date,date,boolean,text,text,text,text,text,boolean,timestamptz,text,uuid,text,integer,integer,uuid,double precision)":
                """
            SELECT count(*) FROM caregiver_push.record_dose(
                NULL, gen_random_uuid()::text, gen_random_uuid()::text, '2026-11-28T08:00:00Z',
                '2026-11-28T08:00:00Z', '17:00', '2026-11-28', '2026-11-28', true, gen_random_uuid()::text, 'PATIENT',
                gen_random_uuid()::text, 'probe', 'evening', true, now(), 'PATIENT', NULL, NULL, 30, 10, NULL, 0)
            """,
            "record_slot_doses(text,text[],text[],boolean[],text,text[],text,text,text,text,date,text,timestamptz,text,uuid,text,integer,integer,uuid,double precision)":
                """
            SELECT count(*) FROM caregiver_push.record_slot_doses(
                gen_random_uuid()::text, '{}', '{}', '{}', '2026-11-28T08:00:00Z', '{}', gen_random_uuid()::text,
                'PATIENT', gen_random_uuid()::text, 'probe', '2026-11-28', 'morning', now(), 'PATIENT', NULL, NULL, 30,
                10, NULL, 0)
            """,
            "record_prn(text,text,integer,text,text,text,text,date,text,integer,text,text,text,text,text,text,text,timestamptz,text,uuid,text,integer,integer,uuid,double precision)":
                """
            SELECT count(*) FROM caregiver_push.record_prn(
                NULL, gen_random_uuid()::text, 0, NULL, gen_random_uuid()::text, gen_random_uuid()::text,
                gen_random_uuid()::text, '2026-11-28', '2026-11-28T08:00:00Z', 1, gen_random_uuid()::text, 'f',
                gen_random_uuid()::text, 'PATIENT', gen_random_uuid()::text, 'probe', 'morning', now(), 'PATIENT', NULL,
                NULL, 30, 10, NULL, 0)
            """,
            "record_push_outcomes(uuid,uuid[],text[],integer[],text[],text[],bigint[],uuid[],text[])":
                "SELECT caregiver_push.record_push_outcomes(gen_random_uuid(), '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}')",
        ]
        for role in ["anon", "authenticated"] {
            for (signature, call) in calls {
                #expect(
                    try owner.query(
                        "SELECT has_function_privilege(\(role), \("caregiver_push." + signature), 'EXECUTE')"
                    )[0].decode(Bool.self, at: 0), "the exposure grants the routine: the refusal is the function's"
                )
                try owner.query("BEGIN")
                defer { _ = try? owner.query("ROLLBACK") }
                try owner.query(PostgresQuery(unsafeSQL: "SET LOCAL ROLE \(role)"))
                let refusal = #expect(throws: PostgresError.self, "\(role) \(signature)") {
                    try owner.query(PostgresQuery(unsafeSQL: call))
                }
                #expect(refusal?.sqlState?.rawValue == "42501", "\(String(describing: refusal))")
                #expect(refusal?.serverMessage?.contains("is for the role caregiver_push_runtime") == true)
            }
        }
    }

    /// Exposed by mistake, the recording's reads (migration 000021) may be executed by the API roles too: they run
    /// with the caller's rights and row security, which admits the API roles to no row, so through them an API role
    /// reads nothing of what the owner reads through them.
    static func readFunctionsReadNothingForAPIRoles(_ owner: PostgresConnection) throws {
        let session = try #require(
            try owner.query("SELECT token_hash FROM caregiver_push.patient_sessions LIMIT 1").single
        ).decode(PostgresBytes.self, at: 0)
        let (medication, patient) = try #require(
            try owner.query(
                """
                SELECT m.id::text, m.patient_id::text FROM caregiver_push.medications m
                WHERE NOT m.is_prn AND EXISTS (SELECT 1 FROM caregiver_push.medication_schedule_times t
                                               WHERE t.medication_id = m.id AND t.time_of_day = '08:00')
                LIMIT 1
                """
            ).single
        ).decode((String, String).self)
        let (prnPatient, key) = try #require(
            try owner.query(
                "SELECT patient_id::text, idempotency_key::text FROM caregiver_push.prn_dose_records LIMIT 1"
            ).single
        ).decode((String, String).self)
        let (caregiver, linked) = try #require(
            try owner.query(
                "SELECT caregiver_id::text, patient_id::text FROM caregiver_push.caregiver_patient_links LIMIT 1"
            ).single
        ).decode((String, String).self)
        let (dosePatient, doseMedication, scheduledAt) = try #require(
            try owner.query(
                """
                SELECT patient_id::text, medication_id::text, scheduled_at FROM caregiver_push.dose_records LIMIT 1
                """
            ).single
        ).decode((String, String, Date).self)
        let calls: [PostgresQuery] = [
            "SELECT count(*) FROM caregiver_push.find_patient_session(\(session), \(Date()))",
            "SELECT count(*) FROM caregiver_push.find_medication(\(medication), \(patient))",
            "SELECT count(*) FROM caregiver_push.find_schedule_time(\(medication), '08:00'::time)",
            "SELECT count(*) FROM caregiver_push.find_scheduled_doses(\(patient), current_date)",
            "SELECT count(*) FROM caregiver_push.find_prn_record(\(prnPatient), \(key), \(key))",
            "SELECT count(*) FROM caregiver_push.find_active_link(\(caregiver), \(linked))",
            """
            SELECT count(*) FROM caregiver_push.find_dose_record(\(dosePatient), \(doseMedication), \(scheduledAt))
            """,
        ]
        func counts() throws -> [Int] { try calls.map { try owner.query($0)[0].decode(Int.self, at: 0) } }
        #expect(try counts() == [1, 1, 1, 1, 1, 1, 1])
        for role in ["anon", "authenticated"] {
            try owner.query("BEGIN")
            defer { _ = try? owner.query("ROLLBACK") }
            try owner.query(PostgresQuery(unsafeSQL: "SET LOCAL ROLE \(role)"))
            #expect(try counts() == [0, 0, 0, 0, 0, 0, 0], "\(role)")
        }
    }

    /// Exposed by mistake, `register_push_device` may be executed by the API roles (Supabase's steps grant every
    /// routine), but refuses them before its first lock: with the caregiver's lock held elsewhere, an API role's call
    /// fails at once with the function's own 42501, where a call that went on would wait for the lock and time out
    /// (55P03).
    static func registerRefusesAPIRoles(_ cluster: OwnDatabase, _ owner: PostgresConnection, caregiver: UUID) throws {
        let holder = try PostgresConnection(url: cluster.url)
        defer { holder.close() }
        try holder.query("BEGIN")
        try holder.query(
            // PushDeviceRegistry.ownerLockNamespace ("OWNR"), as the function takes it.
            "SELECT pg_advisory_xact_lock(\(0x4F57_4E52), hashtext(\(caregiver.uuidString.lowercased())))")
        defer { _ = try? holder.query("ROLLBACK") }
        for role in ["anon", "authenticated"] {
            try owner.query("BEGIN")
            defer { _ = try? owner.query("ROLLBACK") }
            try owner.query("SET LOCAL lock_timeout = 2000")
            #expect(
                try owner.query(
                    "SELECT has_function_privilege(\(role), 'caregiver_push.register_push_device(uuid,text,bytea,text,text,text,integer,integer)', 'EXECUTE')"
                )[0].decode(Bool.self, at: 0), "the mistaken exposure grants the routine: the refusal is the function's"
            )
            try owner.query(PostgresQuery(unsafeSQL: "SET LOCAL ROLE \(role)"))
            let refusal = #expect(throws: PostgresError.self, "\(role)") {
                try owner.query(
                    """
                    SELECT * FROM caregiver_push.register_push_device(
                        \(caregiver), 'probe-token', sha256('probe-token'::bytea), 'ios', 'DEV', NULL, 10, 20)
                    """)
            }
            // Row security's refusal has the same code; the message says which refused.
            #expect(refusal?.sqlState?.rawValue == "42501", "\(String(describing: refusal))")
            #expect(refusal?.serverMessage?.contains("is for the role caregiver_push_runtime") == true)
        }
    }

    @Test("plain PostgreSQL (no Supabase roles): the same migrations apply; a stranger role reaches nothing")
    func plainPostgreSQL() throws {
        let database = try IsolatedDatabase()
        try database.with { owner in
            #expect(try owner.query("SELECT 1 FROM pg_roles WHERE rolname = 'anon'").isEmpty)
            let caregiver = UUID()
            try Self.record(runtimeURL: database.runtimeURL, owner: owner, caregiver: caregiver)
            let stranger = "stranger_" + UUID().uuidString.lowercased().prefix(8)
            try owner.query(PostgresQuery(unsafeSQL: "CREATE ROLE \(stranger) NOLOGIN"))
            let found = try Probe.run(
                owner, schema: "caregiver_push", relations: Self.relations, caregiver: caregiver, roles: [stranger])
            print(Probe.report("plain PostgreSQL, a role with PUBLIC's rights only", found))
            #expect(found.isEmpty)
        }
    }

    @Test("Supabase's linter finds nothing in the schema: RLS on and forced, no definer views, no mutable search_path")
    func linterChecks() throws {
        try TestDatabase.with { connection in
            let findings = try Self.linterFindings(connection)
            #expect(findings.isEmpty, "\(findings)")
        }
    }

    /// What Supabase's linter would find in the schema. A definer-rights view passes only as the migrator's guard over
    /// an app mapping (docs/deploy.md#bring-your-own-tables): a security barrier with a cascaded check option whose
    /// rows exist for the runtime role and the owner only — the row level security a view cannot have.
    static func linterFindings(_ connection: PostgresConnection) throws -> [String] {
        let findings = try connection.query(
            """
            SELECT 'rls_disabled_in_public: ' || c.relname FROM pg_class c
            WHERE c.relnamespace = 'caregiver_push'::regnamespace AND c.relkind IN ('r', 'p')
              AND NOT (c.relrowsecurity AND c.relforcerowsecurity)
            UNION ALL
            SELECT 'security_definer_view: ' || c.relname FROM pg_class c
            WHERE c.relnamespace = 'caregiver_push'::regnamespace AND c.relkind IN ('v', 'm')
              AND NOT coalesce('security_invoker=true' = ANY (c.reloptions), false)
              AND NOT (c.relkind = 'v' AND c.reloptions @> ARRAY['security_barrier=true', 'check_option=cascaded']
                       AND pg_get_viewdef(c.oid) LIKE '%WHERE (CURRENT_USER = ANY (ARRAY[''caregiver_push_runtime''::name, %')
            UNION ALL
            SELECT 'function_search_path_mutable: ' || p.proname FROM pg_proc p
            WHERE p.pronamespace = 'caregiver_push'::regnamespace
              AND NOT coalesce(EXISTS (SELECT 1 FROM unnest(p.proconfig) AS setting
                                       WHERE setting LIKE 'search_path=%'), false)
            UNION ALL
            SELECT 'policy_admits_api_role: ' || polname || ' on ' || polrelid::regclass::text FROM pg_policy
            WHERE polrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'caregiver_push'::regnamespace)
              AND (0 = ANY (polroles) OR EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = ANY (polroles)
                                                  AND r.rolname IN ('anon', 'authenticated')))
            """
        ).map { try $0.decode(String.self, at: 0) }
        // Twelve relations and the history (tables, or a mapping's views): the checks above looked at something.
        #expect(
            try connection.query(
                """
                SELECT count(*) FROM pg_class WHERE relnamespace = 'caregiver_push'::regnamespace
                  AND relkind IN ('r', 'v') AND relname = ANY (\("{" + Self.relations.joined(separator: ",") + "}")::text[])
                """
            )[0].decode(Int.self, at: 0) == Self.relations.count)
        return findings
    }

    @Test("the runtime role: no DDL, no TRUNCATE, no history, nothing outside its schema, no deletes of recordings")
    func runtimeRoleLeastPrivilege() throws {
        let foreign = "app_table_" + UUID().uuidString.lowercased().prefix(8)
        try TestDatabase.with { owner in
            try owner.query(PostgresQuery(unsafeSQL: "CREATE TABLE public.\(foreign) (secret text)"))
            try owner.query(PostgresQuery(unsafeSQL: "INSERT INTO public.\(foreign) VALUES ('kept')"))
            let grants = try owner.query(
                """
                SELECT table_name || ': ' || string_agg(privilege_type, ', ' ORDER BY privilege_type)
                FROM information_schema.role_table_grants
                WHERE table_schema = 'caregiver_push' AND grantee = \(Migrator.runtimeRole)
                GROUP BY table_name ORDER BY table_name
                """
            ).map { try $0.decode(String.self, at: 0) }
            print("DataAPIExposureTests: \(Migrator.runtimeRole)'s privileges:\n  " + grants.joined(separator: "\n  "))
        }
        try Self.runtimeRoleRefusals(runtimeURL: TestDatabase.runtimeURL, foreign: ["public.\(foreign)"])
    }

    /// What the runtime role must not do, each refused; and every relation it works on readable. `foreign`: tables
    /// outside the schema that hold rows (the app's own).
    static func runtimeRoleRefusals(runtimeURL: String, foreign: [String]) throws {
        let runtime = try PostgresConnection(url: runtimeURL)
        defer { runtime.close() }
        let refused =
            [
                "CREATE TABLE caregiver_push.intruder (x int)",
                "CREATE TABLE public.intruder (x int)",
                "ALTER TABLE caregiver_push.push_devices ADD COLUMN intruder int",
                "DROP TABLE caregiver_push.push_deliveries",
                "TRUNCATE caregiver_push.push_deliveries",
                "CREATE INDEX intruder ON caregiver_push.push_devices (token)",
                "SELECT * FROM caregiver_push.schema_migrations",
                "DELETE FROM caregiver_push.dose_records",
                "UPDATE caregiver_push.dose_records SET taken_at = taken_at",
                "UPDATE caregiver_push.patients SET display_name = display_name",
                "DELETE FROM caregiver_push.patients",
                "INSERT INTO caregiver_push.medications (patient_id, start_date) SELECT id, now() FROM caregiver_push.patients",
                "CREATE FUNCTION caregiver_push.intruder() RETURNS int LANGUAGE sql AS 'SELECT 1'",
                "ALTER ROLE \(Migrator.runtimeRole) BYPASSRLS",
            ] + foreign.map { "SELECT * FROM \($0)" }
        for statement in refused {
            #expect(throws: PostgresError.self, "\(statement)") {
                try runtime.query(PostgresQuery(unsafeSQL: statement))
            }
        }
        // What it needs, it has: every relation it works on is readable.
        for relation in Self.relations where relation != "schema_migrations" {
            _ = try runtime.query(PostgresQuery(unsafeSQL: "SELECT count(*) FROM caregiver_push.\(relation)"))
        }
    }

    /// A registration, a scheduled dose and a PRN dose through the built functions, pushed to the FCM fake: every
    /// table the functions write gets rows. `owner` seeds what has no API (patient, link, medications, session).
    static func record(runtimeURL: String, owner: PostgresConnection, caregiver: UUID) throws {
        let fake = try FCMFake()
        let patient = try Seed.patient(owner, displayName: "試験花子")
        try Seed.link(owner, caregiver: caregiver, patient: patient)
        let medication = try Seed.medication(owner, patient: patient, name: "露出試験薬", times: ["08:00"])
        let prn = try Seed.medication(owner, patient: patient, name: "露出試験頓服", isPRN: true)
        let session = try Seed.session(owner, patient: patient)
        let date = TokyoDay.offset(-1)
        let values = [
            "CAREGIVER_TOKEN": try caregiverToken(caregiver), "PATIENT_TOKEN": session,
            "DEVICE_TOKEN": makeDeviceToken(), "INSTALLATION_ID": UUID().uuidString,
            "PATIENT_ID": patient.uuidString.lowercased(), "MEDICATION_ID": medication.uuidString.lowercased(),
            "SCHEDULED_AT": TokyoDay.instant(date, "08:00"), "IDEMPOTENCY_KEY": UUID().uuidString,
        ]
        let environment = fake.environment(["DATABASE_URL": runtimeURL])
        let register = try Executables.run(
            "push-register", input: try Executables.fixture("push-register/valid.json", values),
            environment: environment)
        #expect(register.response?.statusCode == 200, "\(register.stderr)")
        let dose = try Executables.run(
            "dose-record", input: try Executables.fixture("dose-record/patient.json", values), environment: environment)
        #expect(dose.body?["updatedCount"] == .number(1), "\(dose.stderr)")
        var prnValues = values
        prnValues["MEDICATION_ID"] = prn.uuidString.lowercased()
        let prnDose = try Executables.run(
            "prn-record", input: try Executables.fixture("prn-record/patient.json", prnValues),
            environment: environment)
        #expect(prnDose.response?.statusCode == 201 || prnDose.response?.statusCode == 200, "\(prnDose.stderr)")
        #expect(try fake.messages().count >= 1)
        // A key set row too (the HS256 configuration never fetches one), so that no relation is empty.
        try owner.query(
            """
            INSERT INTO caregiver_push.jwks_cache (url, attempted_at) VALUES ('https://example.invalid/jwks', now())
            ON CONFLICT DO NOTHING
            """)
    }

    static func rowCounts(_ connection: PostgresConnection, schema: String) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for relation in relations {
            counts[relation] = try connection.query(
                PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(schema).\(relation)")
            )[0].decode(Int.self, at: 0)
        }
        return counts
    }
}

/// The parts of a Supabase project that decide what its Data API reaches.
enum SupabaseProject {
    /// The API roles as Supabase creates them (`service_role` bypasses row level security) and PostgREST's login role.
    static func createRoles(_ connection: PostgresConnection) throws {
        try connection.executeScript(
            """
            CREATE ROLE anon NOLOGIN NOINHERIT;
            CREATE ROLE authenticated NOLOGIN NOINHERIT;
            CREATE ROLE service_role NOLOGIN NOINHERIT BYPASSRLS;
            CREATE ROLE authenticator NOINHERIT LOGIN;
            GRANT anon, authenticated, service_role TO authenticator;
            GRANT USAGE ON SCHEMA public TO anon, authenticated, service_role;
            """)
    }

    /// "Default privileges for new entities" on: every table, sequence and function created in `public` is granted
    /// to the API roles.
    static func grantNewTablesInPublic(_ connection: PostgresConnection) throws {
        try connection.executeScript(
            """
            ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON TABLES TO anon, authenticated, service_role;
            ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON SEQUENCES TO anon, authenticated, service_role;
            ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON FUNCTIONS TO anon, authenticated, service_role;
            """)
    }

    /// The same grants for new objects in every schema (default privileges without `IN SCHEMA`), which a schema's own
    /// default privileges cannot take back: only the migrator's revocations after the fact can.
    static func grantNewTablesEverywhere(_ connection: PostgresConnection) throws {
        try connection.executeScript(
            """
            ALTER DEFAULT PRIVILEGES GRANT ALL ON TABLES TO anon, authenticated, service_role;
            ALTER DEFAULT PRIVILEGES GRANT ALL ON SEQUENCES TO anon, authenticated, service_role;
            """)
    }

    /// What PostgreSQL lists as granted to the API roles and PUBLIC on the schema and everything in it (a routine
    /// with no ACL of its own is executable by PUBLIC: `acldefault` says so).
    static func grants(_ connection: PostgresConnection, schema: String) throws -> [String] {
        try connection.query(
            """
            SELECT 'schema: ' || coalesce(r.rolname, 'PUBLIC') || ' ' || a.privilege_type
            FROM pg_namespace n, aclexplode(n.nspacl) a LEFT JOIN pg_roles r ON r.oid = a.grantee
            WHERE n.nspname = \(schema) AND (a.grantee = 0 OR r.rolname IN ('anon', 'authenticated', 'service_role'))
            UNION ALL
            SELECT c.relname || ': ' || coalesce(r.rolname, 'PUBLIC') || ' ' || a.privilege_type
            FROM pg_class c, aclexplode(c.relacl) a LEFT JOIN pg_roles r ON r.oid = a.grantee
            WHERE c.relnamespace = to_regnamespace(\(schema))
              AND (a.grantee = 0 OR r.rolname IN ('anon', 'authenticated', 'service_role'))
            UNION ALL
            SELECT p.proname || '(): ' || coalesce(r.rolname, 'PUBLIC') || ' ' || a.privilege_type
            FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f'::"char", p.proowner))) a
                LEFT JOIN pg_roles r ON r.oid = a.grantee
            WHERE p.pronamespace = to_regnamespace(\(schema))
              AND (a.grantee = 0 OR r.rolname IN ('anon', 'authenticated', 'service_role'))
            """
        ).map { try $0.decode(String.self, at: 0) }
    }

    /// Supabase's steps for serving a custom schema through the Data API, applied to this one by mistake (their
    /// default privileges are the project owner's, `FOR ROLE postgres`: here another role than the migrator's).
    static func exposeSchemaByMistake(_ connection: PostgresConnection, schema: String) throws {
        try connection.executeScript(
            PostgresQuery(
                unsafeSQL: """
                    GRANT USAGE ON SCHEMA \(schema) TO anon, authenticated, service_role;
                    GRANT ALL ON ALL TABLES IN SCHEMA \(schema) TO anon, authenticated, service_role;
                    GRANT ALL ON ALL ROUTINES IN SCHEMA \(schema) TO anon, authenticated, service_role;
                    GRANT ALL ON ALL SEQUENCES IN SCHEMA \(schema) TO anon, authenticated, service_role;
                    DO $$ BEGIN
                        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'project_admin') THEN
                            CREATE ROLE project_admin NOLOGIN;
                        END IF;
                    END $$;
                    ALTER DEFAULT PRIVILEGES FOR ROLE project_admin IN SCHEMA \(schema)
                        GRANT ALL ON TABLES TO anon, authenticated, service_role;
                    ALTER DEFAULT PRIVILEGES FOR ROLE project_admin IN SCHEMA \(schema)
                        GRANT ALL ON ROUTINES TO anon, authenticated, service_role;
                    ALTER DEFAULT PRIVILEGES FOR ROLE project_admin IN SCHEMA \(schema)
                        GRANT ALL ON SEQUENCES TO anon, authenticated, service_role;
                    """))
    }
}

/// A database as the previous version of the migrator left it: the first three migrations applied in `public`, with
/// `public.schema_migrations`.
enum LegacyDeployment {
    static func migrate(_ connection: PostgresConnection) throws {
        let migrator = try Migrator(directory: TestDatabase.migrationsDirectory)
        try connection.withTransaction { connection in
            try connection.query("SET LOCAL search_path TO public")
            try connection.query(
                """
                CREATE TABLE schema_migrations (
                    version text PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())
                """)
            for migration in migrator.migrations.prefix(3) {
                try connection.executeScript(PostgresQuery(unsafeSQL: migration.sql))
                try connection.query(
                    "INSERT INTO schema_migrations (version, name) VALUES (\(migration.version), \(migration.name))")
            }
        }
    }

    /// One household with a row in every table, written as the previous version wrote them.
    static func fill(_ connection: PostgresConnection) throws -> (caregiver: UUID, patient: UUID) {
        let caregiver = UUID()
        let patient = UUID()
        let medication = UUID()
        let device = UUID()
        let token = makeDeviceToken()
        let key = "doseTaken:\(patient.uuidString.lowercased()):2026-11-20:morning:08:00"
        try connection.withTransaction { connection in
            try connection.query("SET LOCAL search_path TO public")
            try connection.query("INSERT INTO patients (id, display_name) VALUES (\(patient), '旧版花子')")
            try connection.query(
                "INSERT INTO caregiver_patient_links (caregiver_id, patient_id) VALUES (\(caregiver), \(patient))")
            try connection.query(
                """
                INSERT INTO patient_sessions (patient_id, token_hash, expires_at)
                VALUES (\(patient), \(PostgresBytes(Array(repeating: 7, count: 32))), now() + interval '1 day')
                """)
            try connection.query(
                """
                INSERT INTO medications (id, patient_id, name, start_date)
                VALUES (\(medication), \(patient), '旧版の薬', '2020-01-01')
                """)
            try connection.query(
                "INSERT INTO medication_schedule_times (medication_id, time_of_day) VALUES (\(medication), '08:00')")
            try connection.query(
                """
                INSERT INTO dose_records (patient_id, medication_id, scheduled_at, taken_at, recorded_by_role,
                                          recorded_by_id)
                VALUES (\(patient), \(medication), '2026-11-20T08:00:00+09:00', '2026-11-20T08:01:00+09:00',
                        'PATIENT', \(patient))
                """)
            try connection.query(
                """
                INSERT INTO prn_dose_records (patient_id, medication_id, taken_at, quantity, recorded_by_role,
                                              recorded_by_id)
                VALUES (\(patient), \(medication), '2026-11-20T09:00:00+09:00', 1, 'PATIENT', \(patient))
                """)
            try connection.query(
                """
                INSERT INTO push_devices (id, owner_type, owner_id, token, token_sha256, platform, environment)
                VALUES (\(device), 'CAREGIVER', \(caregiver), \(token), sha256(convert_to(\(token), 'UTF8')), 'ios',
                        'DEV')
                """)
            try connection.query(
                """
                INSERT INTO push_events (event_key, kind, source, patient_id, local_date, slot, within_time, taken_at)
                VALUES (\(key), 'DOSE_TAKEN', 'dose-record', \(patient), '2026-11-20', 'morning', true,
                        '2026-11-20T08:01:00+09:00')
                """)
            try connection.query(
                "INSERT INTO push_deliveries (event_key, push_device_id, status) VALUES (\(key), \(device), 'SENT')")
            try connection.query(
                """
                INSERT INTO fcm_access_tokens (client_email, access_token, expires_at)
                VALUES ('sender@example.iam.gserviceaccount.com', 'ya29.a-live-token-of-the-earlier-version',
                        now() + interval '1 hour')
                """)
            try connection.query(
                "INSERT INTO jwks_cache (url, attempted_at) VALUES ('https://example.invalid/jwks', now())")
        }
        return (caregiver, patient)
    }
}

/// PostgREST's view of the database: each attempt runs as an API role with a caregiver's claims, in a transaction that
/// is rolled back.
enum Probe {
    enum Operation: String, CaseIterable { case select, insert, update, delete, execute }

    struct Exposure: CustomStringConvertible {
        let role: String
        let relation: String
        let operation: Operation
        var description: String { "\(role) can \(operation.rawValue) \(relation)" }
    }

    /// Every (role, relation, operation) that got through. An attempt gets through when it returns or changes a row:
    /// a SELECT that returns rows, an UPDATE or DELETE that touches rows, an INSERT of the rows the role can read
    /// (which can only fail on a unique key if it read some). A refusal is an error of insufficient privilege or of
    /// row level security, or no row at all — every relation holds rows, which the owner checks first.
    static func run(
        _ owner: PostgresConnection, schema: String, relations: [String], caregiver: UUID,
        roles: [String] = ["anon", "authenticated"]
    ) throws -> [Exposure] {
        for relation in relations {
            let rows = try owner.query(PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(schema).\(relation)"))[0]
                .decode(Int.self, at: 0)
            #expect(rows > 0, "\(schema).\(relation) holds no row: the probe would prove nothing")
        }
        let claims = #"{"sub":"\#(caregiver.uuidString.lowercased())","role":"authenticated","aud":"authenticated"}"#
        var exposures: [Exposure] = []
        for role in roles {
            for relation in relations {
                let column = try owner.query(
                    """
                    SELECT quote_ident(attname) FROM pg_attribute
                    WHERE attrelid = to_regclass(\(schema + "." + relation)) AND attnum = 1
                    """
                )[0].decode(String.self, at: 0)
                let table = "\(schema).\(relation)"
                let attempts: [(Operation, String)] = [
                    (.select, "SELECT count(*) FROM (SELECT * FROM \(table)) AS visible"),
                    (
                        .insert,
                        "WITH i AS (INSERT INTO \(table) SELECT * FROM \(table) RETURNING 1) SELECT count(*) FROM i"
                    ),
                    (
                        .update,
                        "WITH u AS (UPDATE \(table) SET \(column) = \(column) RETURNING 1) SELECT count(*) FROM u"
                    ),
                    (.delete, "WITH d AS (DELETE FROM \(table) RETURNING 1) SELECT count(*) FROM d"),
                ]
                for (operation, statement) in attempts
                where try attempt(owner, role: role, claims: claims, statement) {
                    exposures.append(Exposure(role: role, relation: relation, operation: operation))
                }
            }
        }
        // The schema's routine (`register_push_device`, migration 000009): PostgREST serves a function as
        // `/rpc/<name>` to a role that may execute it. Closed, no API role may (`grants` lists any grant); exposed by
        // mistake (Supabase's steps grant every routine too), the call is refused by the function itself: it counts
        // as an exposure only if it registers a device.
        let registers =
            try owner.query(
                "SELECT count(*) FROM pg_proc WHERE pronamespace = to_regnamespace(\(schema)) AND proname = 'register_push_device'"
            )[0].decode(Int.self, at: 0) == 1
        // The project's schema has it (so the probe calls something); an earlier version's `public` has none.
        #expect(registers == (schema == "caregiver_push"))
        if registers {
            let call = """
                SELECT count(*) FROM \(schema).register_push_device(
                    '\(caregiver.uuidString.lowercased())', 'probe-token', sha256('probe-token'::bytea), 'ios', 'DEV',
                    NULL, 10, 20)
                """
            for role in roles where try attempt(owner, role: role, claims: claims, call) {
                exposures.append(Exposure(role: role, relation: "register_push_device()", operation: .execute))
            }
        }
        return exposures
    }

    /// Whether one statement, run as `role` with `claims`, returned a count above zero. Always rolled back.
    static func attempt(_ owner: PostgresConnection, role: String, claims: String, _ statement: String) throws -> Bool {
        try owner.query("BEGIN")
        defer { _ = try? owner.query("ROLLBACK") }
        try owner.query("SELECT set_config('request.jwt.claims', \(claims), true)")
        try owner.query(PostgresQuery(unsafeSQL: "SET LOCAL ROLE \(role)"))
        let rows: PostgresRows
        do {
            rows = try owner.query(PostgresQuery(unsafeSQL: statement))
        } catch {
            // 23505: the INSERT read rows and wrote them back; only a unique key stopped the copy.
            return error.sqlState == .uniqueViolation
        }
        return try rows[0].decode(Int.self, at: 0) > 0
    }

    static func report(_ title: String, _ exposures: [Exposure]) -> String {
        var byRelation: [String: [String]] = [:]
        for exposure in exposures {
            byRelation[exposure.relation, default: []].append("\(exposure.role) \(exposure.operation.rawValue)")
        }
        let lines = byRelation.keys.sorted().map { "  \($0): \(byRelation[$0]!.joined(separator: ", "))" }
        return "DataAPIExposureTests: \(title): \(exposures.count) exposures over \(byRelation.count) relations"
            + (lines.isEmpty ? "" : "\n" + lines.joined(separator: "\n"))
    }
}

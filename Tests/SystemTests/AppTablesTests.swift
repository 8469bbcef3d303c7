import Codecs
import CaregiverPush
import Foundation
import Libpq
import Logging
import Migrations
import ProcessSupervision
import Testing
import TestFixtures
import TestSupport

/// Bring your own tables (docs/deploy.md#bring-your-own-tables): the functions migrated onto an app schema in Prisma's
/// conventions on Supabase (`Tests/Fixtures/prisma-app/schema.sql`), with the mapping an operator writes for it
/// (`app-mapping.sql`), record through the built executables as the runtime role, and what they record is in the
/// app's own tables; the app's households take effect at the next invocation, with no copy.
@Suite("bring your own tables: the functions on a Prisma app's schema", .serialized)
struct AppTablesTests {
    static let fixtures = TestDatabase.repositoryRoot.appendingPathComponent("Tests/Fixtures/prisma-app")
    static var appSchema: String {
        get throws { try String(contentsOf: fixtures.appendingPathComponent("schema.sql"), encoding: .utf8) }
    }
    static var mapping: String {
        get throws { try String(contentsOf: fixtures.appendingPathComponent("app-mapping.sql"), encoding: .utf8) }
    }

    /// A Supabase project of the test's own with the app's schema in `public`, not migrated yet.
    static func withApp(_ body: (OwnDatabase, PostgresConnection) throws -> Void) throws {
        try DataAPIExposureTests.withSupabaseProject { cluster, owner in
            try owner.executeScript(PostgresQuery(unsafeSQL: try appSchema))
            try body(cluster, owner)
        }
    }

    static func migrate(_ owner: PostgresConnection, mapping: String?) throws {
        try Migrator(directory: TestDatabase.migrationsDirectory, appMapping: mapping).migrate(
            owner, logger: Logger(label: "tests"))
        try owner.query(PostgresQuery(unsafeSQL: "ALTER ROLE \(Migrator.runtimeRole) LOGIN"))
    }

    /// A household the way the app writes it: text ids, UTC wall-clock timestamps, a session's token hash.
    struct Household {
        let patient: String
        let caregiver: UUID
        let scheduled: String
        let other: String
        let prn: String
        let session: String
    }

    static func seed(_ owner: PostgresConnection, patient: String, caregiver: UUID) throws -> Household {
        let token = try PatientSessionToken.generate()
        let (scheduled, other, prn) = ("clmed\(UUID().uuidString.prefix(8).lowercased())", "clmed2", "clprn1")
        try owner.query(
            """
            INSERT INTO public."Patient" ("id", "displayName", "updatedAt") VALUES (\(patient), '山田花子', now())
            """)
        try owner.query(
            """
            INSERT INTO public."CaregiverPatientLink" ("id", "caregiverId", "patientId")
            VALUES (\("link-\(UUID().uuidString)"), \(caregiver), \(patient))
            """)
        for (id, isPRN, times) in [(scheduled, false, ["08:00", "20:00"]), (other, false, ["08:00"]), (prn, true, [])] {
            try owner.query(
                """
                INSERT INTO public."Medication" ("id", "patientId", "name", "isPrn", "startDate", "updatedAt")
                VALUES (\(id + patient), \(patient), '朝の薬', \(isPRN), '2020-01-01 00:00:00', now())
                """)
            for time in times {
                try owner.query(
                    """
                    INSERT INTO public."MedicationSchedule" ("id", "medicationId", "time")
                    VALUES (\(UUID().uuidString), \(id + patient), \(time))
                    """)
            }
        }
        try owner.query(
            """
            INSERT INTO public."PatientSession" ("id", "patientId", "tokenHash", "expiresAt")
            VALUES (\("sess-\(UUID().uuidString)"), \(patient), \(PostgresBytes(token.hash)),
                    (now() AT TIME ZONE 'UTC') + interval '1 hour')
            """)
        return Household(
            patient: patient, caregiver: caregiver, scheduled: scheduled + patient, other: other + patient,
            prn: prn + patient, session: token.text)
    }

    @Test("doses, slots and PRNs recorded through the functions land in the app's tables and push with its ids")
    func recordingsLandInTheAppsTables() throws {
        try Self.recordingsLandInTheAppsTablesBody()
    }

    static func recordingsLandInTheAppsTablesBody() throws {
        try Self.withApp { cluster, owner in
            // As DataAPIExposureTests.newSupabaseProject: default privileges grant every new object to the API roles.
            try SupabaseProject.grantNewTablesEverywhere(owner)
            try Self.migrate(owner, mapping: try Self.mapping)
            let home = try Self.seed(owner, patient: "patient-123", caregiver: UUID())
            let fake = try FCMFake()
            let environment = fake.environment(["DATABASE_URL": cluster.runtimeURL])
            let yesterday = TokyoDay.offset(-1)
            let device = makeDeviceToken()
            var values = [
                "CAREGIVER_TOKEN": try caregiverToken(home.caregiver), "PATIENT_TOKEN": home.session,
                "DEVICE_TOKEN": device, "INSTALLATION_ID": UUID().uuidString, "PATIENT_ID": home.patient,
                "MEDICATION_ID": home.scheduled, "SCHEDULED_AT": TokyoDay.instant(yesterday, "08:00"),
                "DATE": yesterday, "SLOT": "bedtime", "IDEMPOTENCY_KEY": UUID().uuidString,
            ]
            func run(_ function: String, _ fixture: String) throws -> Executables.Run {
                let run = try Executables.run(
                    function, input: try Executables.fixture("\(function)/\(fixture).json", values),
                    environment: environment)
                return run
            }
            let register = try run("push-register", "valid")
            #expect(register.response?.statusCode == 200, "\(register.stderr)")

            // The patient's single dose, a slot, a PRN.
            let dose = try run("dose-record", "patient")
            #expect(dose.body?["updatedCount"] == .number(1), "\(dose.stderr)")
            #expect(dose.body?["record"]?["patientId"] == .string("patient-123"))
            let slot = try run("slot-bulk-record", "patient")
            #expect(slot.body?["updatedCount"] == .number(1), "\(slot.stderr)")
            values["MEDICATION_ID"] = home.prn
            let prn = try run("prn-record", "patient")
            #expect(prn.body?["record"]?["medicationId"] == .string(home.prn), "\(prn.stderr)")
            #expect(try run("prn-record", "patient").body?["updatedCount"] == .number(0))

            // As the app's History reads them: its own tables and columns, UTC wall-clock times, through Supabase's
            // Data API as the signed-in caregiver (`authenticated` with their claims), under the app's own policies.
            func historyAs(_ caregiver: UUID) throws -> [(String, String, String, String, Bool)] {
                try owner.query("BEGIN")
                defer { _ = try? owner.query("ROLLBACK") }
                try owner.query(
                    "SELECT set_config('request.jwt.claim.sub', \(caregiver.uuidString.lowercased()), true)")
                try owner.query("SET LOCAL ROLE authenticated")
                return try owner.query(
                    """
                    SELECT "medicationId", to_char("scheduledAt", 'YYYY-MM-DD"T"HH24:MI'), "recordedByRole"::text,
                           "recordedById", "recordingGroupId" IS NOT NULL
                    FROM public."DoseRecord" WHERE "patientId" = 'patient-123' ORDER BY "scheduledAt"
                    """
                ).map { try $0.decode((String, String, String, String, Bool).self) }
            }
            let history = try historyAs(home.caregiver)
            // Another signed-in user sees none of it: the app's row level security holds for what the functions wrote.
            #expect(try historyAs(UUID()).isEmpty)
            print(
                "AppTablesTests: public.\"DoseRecord\" as the app's History reads it:\n  "
                    + history.map { "\($0)" }.joined(separator: "\n  "))
            let dayBefore = TokyoDay.offset(-2)
            #expect(history.count == 2)
            #expect(history.first?.0 == home.scheduled && history.first?.1 == "\(dayBefore)T23:00")
            #expect(history.last?.1 == "\(yesterday)T11:00" && history.last?.4 == true)
            #expect(history.allSatisfy { $0.2 == "PATIENT" && $0.3 == "patient-123" })
            let prnRows = try owner.query(
                """
                SELECT "quantity", "idempotencyKey" FROM public."PrnDoseRecord" WHERE "patientId" = 'patient-123'
                """
            ).map { try $0.decode((Int, String).self) }
            print("AppTablesTests: public.\"PrnDoseRecord\" (quantity, idempotencyKey): \(prnRows)")
            #expect(prnRows.count == 1 && prnRows.first?.0 == 2)

            // One push per recording, to the caregiver's device, carrying the app's patient id.
            let pushed = try fake.messages(to: [device])
            #expect(pushed.count == 3)
            #expect(pushed.allSatisfy { $0["message"]?["data"]?["patientId"] == .string("patient-123") })

            // The app unlinks the caregiver: their next recording is refused, with no copy step.
            values["MEDICATION_ID"] = home.other
            values["SCHEDULED_AT"] = TokyoDay.instant(dayBefore, "08:00")
            values["TAKEN_AT"] = TokyoDay.instant(dayBefore, "08:05")
            try owner.query(
                """
                UPDATE public."CaregiverPatientLink" SET "revokedAt" = now() AT TIME ZONE 'UTC'
                WHERE "caregiverId" = \(home.caregiver)
                """)
            #expect(try run("dose-record", "caregiver").response?.statusCode == 404)
            // The app links a new caregiver and creates a new household: both work at once.
            let newcomer = UUID()
            try owner.query(
                """
                INSERT INTO public."CaregiverPatientLink" ("id", "caregiverId", "patientId")
                VALUES ('link-newcomer', \(newcomer), 'patient-123')
                """)
            values["CAREGIVER_TOKEN"] = try caregiverToken(newcomer)
            let byNewcomer = try run("dose-record", "caregiver")
            #expect(byNewcomer.body?["updatedCount"] == .number(1), "\(byNewcomer.stderr)")
            let recorder = try owner.query(
                """
                SELECT "recordedByRole"::text, "recordedById" FROM public."DoseRecord"
                WHERE "medicationId" = \(home.other)
                """
            ).single?.decode((String, String).self)
            #expect(recorder?.0 == "CAREGIVER" && recorder?.1 == newcomer.uuidString.lowercased())
            let second = try Self.seed(owner, patient: "clx9f3k2a0000qz8h1b2c3d4e", caregiver: UUID())
            values["PATIENT_TOKEN"] = second.session
            values["MEDICATION_ID"] = second.scheduled
            #expect(try run("dose-record", "patient").body?["record"]?["patientId"] == .string(second.patient))
            try Self.checkLeastPrivilege(cluster, owner, caregiver: home.caregiver)
        }
    }

    /// Least privilege and the Data API's closure with the app's tables: last round's checks
    /// (DataAPIExposureTests) in this mode. The runtime role reaches only the contract's columns of the views and
    /// nothing of the app's tables; the API roles are granted nothing, and exposed by mistake, reach nothing.
    static func checkLeastPrivilege(_ cluster: OwnDatabase, _ owner: PostgresConnection, caregiver: UUID) throws {
        let role = Migrator.runtimeRole
        func allowed(_ check: String) throws -> Bool {
            try owner.query(PostgresQuery(unsafeSQL: "SELECT \(check)"))[0].decode(Bool.self, at: 0)
        }
        let appTables = ["Patient", "CaregiverPatientLink", "PatientSession", "Medication", "DoseRecord"]
        for table in appTables {
            #expect(try !allowed("has_table_privilege('\(role)', 'public.\"\(table)\"', 'SELECT,INSERT,UPDATE')"))
        }
        let view = "caregiver_push.dose_records"
        #expect(try allowed("has_column_privilege('\(role)', '\(view)', 'taken_at', 'INSERT')"))
        #expect(try !allowed("has_column_privilege('\(role)', '\(view)', 'updated_at', 'SELECT')"))
        #expect(try !allowed("has_table_privilege('\(role)', '\(view)', 'UPDATE,DELETE,TRUNCATE')"))
        #expect(try !allowed("has_table_privilege('\(role)', 'caregiver_push.patients', 'INSERT')"))
        // The medication's name is not in the view at all.
        #expect(
            try !allowed(
                """
                EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'caregiver_push'
                        AND table_name = 'medications' AND column_name = 'name')
                """))
        try DataAPIExposureTests.runtimeRoleRefusals(
            runtimeURL: cluster.runtimeURL, foreign: appTables.map { "public.\"\($0)\"" })
        let findings = try DataAPIExposureTests.linterFindings(owner)
        #expect(findings.isEmpty, "\(findings)")
        // A key set row too (the HS256 configuration never fetches one), so that no relation is empty.
        try owner.query(
            """
            INSERT INTO caregiver_push.jwks_cache (url, attempted_at) VALUES ('https://example.invalid/jwks', now())
            ON CONFLICT DO NOTHING
            """)
        // Default privileges granted every view to the API roles; the migrator took each grant back, the operator's
        // own views behind the guards included.
        for schema in ["caregiver_push", "caregiver_push_app"] {
            let granted = try SupabaseProject.grants(owner, schema: schema)
            #expect(granted.isEmpty, "\(schema): \(granted)")
        }
        let closed = try Probe.run(
            owner, schema: "caregiver_push", relations: ProjectSchema.relations, caregiver: caregiver)
        print(Probe.report("bring your own tables, automatic grants on", closed))
        #expect(closed.isEmpty)
        try SupabaseProject.exposeSchemaByMistake(owner, schema: "caregiver_push")
        let exposed = try Probe.run(
            owner, schema: "caregiver_push", relations: ProjectSchema.relations, caregiver: caregiver)
        print(Probe.report("bring your own tables, the schema exposed by mistake", exposed))
        #expect(exposed.isEmpty)
        try DataAPIExposureTests.registerRefusesAPIRoles(cluster, owner, caregiver: caregiver)
        // The app's own tables keep their own row level security.
        for table in appTables {
            #expect(try allowed("(SELECT relrowsecurity FROM pg_class WHERE oid = 'public.\"\(table)\"'::regclass)"))
        }
    }

    @Test("with a mapping the households are the app's: the households functions and the deployment check say so")
    func householdsAreTheApps() throws {
        try Self.withApp { cluster, owner in
            try Self.migrate(owner, mapping: try Self.mapping)
            try owner.query("ALTER ROLE caregiver_push_households LOGIN")
            let householdsURL = "postgresql://caregiver_push_households@127.0.0.1:\(cluster.port)/caregiver_push"
            let households = try PostgresConnection(url: householdsURL)
            defer { households.close() }
            let refusal = #expect(throws: PostgresError.self) {
                try households.query("SELECT caregiver_push.household_create_patient('x')")
            }
            #expect(refusal?.sqlState?.rawValue == "0A000", "\(String(reflecting: refusal))")
            #expect(refusal?.serverMessage?.contains("the households are the app's") == true)
            #expect(try owner.query("SELECT count(*) FROM public.\"Patient\"")[0].decode(Int.self, at: 0) == 0)
            // The deployment check gets as far as the household, says why, and leaves no device enabled.
            let fake = try FCMFake()
            let result = try ChildProcess.run(
                executable: Executables.binDirectory.appendingPathComponent("runner"), arguments: ["check-deployment"],
                environment: fake.environment([
                    "DATABASE_URL": cluster.runtimeURL, "HOUSEHOLDS_DATABASE_URL": householdsURL,
                    "CHECK_CAREGIVER_TOKEN": try caregiverToken(UUID()),
                ]),
                input: Data())
            let stderr = String(decoding: result.standardError, as: UTF8.self)
            print("AppTablesTests: runner check-deployment with a mapping: \(stderr)")
            #expect(result.exitStatus == 1)
            #expect(
                stderr.hasPrefix(
                    "deployment check failed at throwaway household: the households login was refused: "
                        + "household_create_patient: the households are the app's"), "\(stderr)")
            #expect(
                try owner.query("SELECT count(*) FROM caregiver_push.push_devices WHERE is_enabled")[0]
                    .decode(Int.self, at: 0) == 0)
        }
    }

    /// Each way a mapping can break the contract, and the message that names it.
    static let brokenMappings: [(name: String, edit: @Sendable (String) -> String, appSQL: String?, expected: String)] =
        [
            (
                "a missing relation",
                {
                    $0.replacingOccurrences(
                        of: "CREATE VIEW medication_schedule_times", with: "CREATE VIEW unused_times")
                },
                nil, "caregiver_push.medication_schedule_times is missing"
            ),
            (
                "a missing column",
                { $0.replacingOccurrences(of: ",\n           \"revokedAt\" AS revoked_at", with: "") },
                nil, "caregiver_push.patient_sessions.revoked_at is missing"
            ),
            (
                "a wrong type",
                {
                    $0.replacingOccurrences(
                        of: "\"displayName\" AS display_name", with: "\"birthYear\" AS display_name")
                },
                nil, "caregiver_push.patients.display_name is integer; the contract wants text"
            ),
            (
                "a non-updatable target",
                {
                    $0.replacingOccurrences(
                        of: "\"takenAt\" AS taken_at, \"recordedByRole\"",
                        with: "\"takenAt\" + interval '0' AS taken_at, \"recordedByRole\"")
                },
                nil, "caregiver_push.dose_records.taken_at cannot be inserted into"
            ),
            (
                "a key without its unique index", { $0 },
                "DROP INDEX public.\"DoseRecord_patientId_medicationId_scheduledAt_key\"",
                "caregiver_push.dose_records: no unique index on (patient_id, medication_id, scheduled_at)"
            ),
            (
                "a look-up without its index", { $0 }, "DROP INDEX public.\"PatientSession_tokenHash_key\"",
                "caregiver_push.patient_sessions: no index serves a look-up by (token_hash)"
            ),
        ]

    @Test("a broken mapping is refused with a message naming it, and nothing is applied", arguments: 0..<6)
    func brokenMappingRefused(index: Int) throws {
        let broken = Self.brokenMappings[index]
        try Self.withApp { _, owner in
            try Self.migrate(owner, mapping: nil)
            if let appSQL = broken.appSQL { try owner.query(PostgresQuery(unsafeSQL: appSQL)) }
            var message = ""
            do {
                try Self.migrate(owner, mapping: broken.edit(try Self.mapping))
            } catch {
                message = "\(error)"
            }
            print("\(broken.name): \(message)")
            #expect(message.contains(broken.expected), "\(broken.name): \(message)")
            // Nothing half-applied: the functions' own household tables are still there, and no mapping recorded.
            let kinds = try owner.query(
                """
                SELECT relkind::text FROM pg_class WHERE relnamespace = 'caregiver_push'::regnamespace
                  AND relname IN ('patients', 'dose_records', 'medication_schedule_times')
                """
            ).map { try $0.decode(String.self, at: 0) }
            #expect(kinds == ["r", "r", "r"])
            #expect(
                try owner.query("SELECT to_regclass('caregiver_push.app_mapping') IS NULL")[0].decode(Bool.self, at: 0))
        }
    }

    @Test("a session that ran the outbox and the reads before the mapping runs them after with the mapping's id types")
    func outboxFollowsTheMapping() throws {
        try Self.withApp { cluster, owner in
            try Self.migrate(owner, mapping: nil)
            // A server session of the runtime role compiles the outbox function with the functions' own id types
            // (uuid): a recording whose dose row is not there returns at once, after the compile.
            let runtime = try PostgresConnection(url: cluster.runtimeURL)
            defer { runtime.close() }
            func enqueue(kind: String?, record: String?, patient: String, key: String) throws -> Int {
                try runtime.query(
                    """
                    SELECT count(*) FROM caregiver_push.enqueue_dose_taken(
                        \(kind)::text, \(record)::text, \(key)::text, 'dose-record', \(patient)::text,
                        '2026-11-28', 'morning', NULL, true, now(), 'PATIENT', NULL, 'DEV', 30, 10, NULL, 0)
                    """
                )[0].decode(Int.self, at: 0)
            }
            // The recording's reads (migration 000021), each compiled too: ids that are UUIDs, found nowhere.
            func reads(
                session: [UInt8], caregiver: String, patient: String, medication: String, keys: (String, String)
            ) throws -> [Int] {
                try [
                    runtime.query(
                        """
                        SELECT count(*) FROM caregiver_push.find_patient_session(\(PostgresBytes(session)), \(Date()))
                        """),
                    runtime.query("SELECT count(*) FROM caregiver_push.find_medication(\(medication), \(patient))"),
                    runtime.query(
                        "SELECT count(*) FROM caregiver_push.find_schedule_time(\(medication), '08:00'::time)"),
                    runtime.query(
                        "SELECT count(*) FROM caregiver_push.find_scheduled_doses(\(patient), '2026-11-28'::date)"),
                    runtime.query(
                        "SELECT count(*) FROM caregiver_push.find_prn_record(\(patient), \(keys.0), \(keys.1))"),
                    runtime.query("SELECT count(*) FROM caregiver_push.find_active_link(\(caregiver), \(patient))"),
                    runtime.query(
                        """
                        SELECT count(*) FROM caregiver_push.find_dose_record(
                            \(patient), \(medication), '2026-11-28T08:00:00Z')
                        """),
                ].map { try $0[0].decode(Int.self, at: 0) }
            }
            // dose-record's call (migration 000022): a caregiver that is not linked, refused before it reads on.
            func recordDose(caregiver: String, patient: String, medication: String) throws -> String {
                try runtime.query(
                    """
                    SELECT outcome FROM caregiver_push.record_dose(
                        \(caregiver), \(patient), \(medication), '2026-11-28T08:00:00Z', '2026-11-28T08:00:00Z',
                        '17:00'::time, '2026-11-28', '2026-11-28', true, \(patient), 'CAREGIVER', \(caregiver),
                        'probe', 'evening', true, now(), 'CAREGIVER', NULL, NULL, 30, 10, NULL, 0)
                    """
                )[0].decode(String.self, at: 0)
            }
            // prn-record's call: a caregiver that is not linked, refused before it reads on.
            func recordPRN(caregiver: String, patient: String, medication: String, key: String) throws -> String {
                try runtime.query(
                    """
                    SELECT outcome FROM caregiver_push.record_prn(
                        \(caregiver), \(patient), 0, NULL, \(key), \(key), \(medication), '2026-11-28',
                        '2026-11-28T08:00:00Z', 1, \(key), 'f', \(patient), 'CAREGIVER', \(caregiver), 'probe',
                        'evening', now(), 'CAREGIVER', NULL, NULL, 30, 10, NULL, 0)
                    """
                )[0].decode(String.self, at: 0)
            }
            // slot-bulk-record's call: no dose to record, nothing written.
            func recordSlot(patient: String) throws -> Int {
                try runtime.query(
                    """
                    SELECT count(*) FROM caregiver_push.record_slot_doses(
                        \(patient), '{}', '{}', '{}', '2026-11-28T08:00:00Z', '{}', \(patient), 'PATIENT', \(patient),
                        'probe', '2026-11-28', 'morning', now(), 'PATIENT', NULL, NULL, 30, 10, NULL, 0)
                    """
                )[0].decode(Int.self, at: 0)
            }
            let before = UUID().uuidString.lowercased()
            #expect(try enqueue(kind: "dose", record: before, patient: before, key: "before") == 0)
            #expect(
                try reads(
                    session: Array(repeating: 0, count: 32), caregiver: before, patient: before, medication: before,
                    keys: (before, before)) == [0, 0, 0, 0, 0, 0, 0])
            #expect(try recordDose(caregiver: before, patient: before, medication: before) == "not-linked")
            #expect(try recordSlot(patient: before) == 0)
            #expect(try recordPRN(caregiver: before, patient: before, medication: before, key: before) == "not-linked")
            // The app's ids are text; the same session then queues an event for one of its patients, and reads its
            // session, medications and schedule with text ids (and idempotency keys) a uuid could not hold.
            try Self.migrate(owner, mapping: try Self.mapping)
            let caregiver = UUID()
            let home = try Self.seed(owner, patient: "patient-123", caregiver: caregiver)
            #expect(try enqueue(kind: nil, record: nil, patient: home.patient, key: "after") == 0)
            let session = try #require(PatientSessionToken(home.session))
            // The app's instants are timestamps without time zone, in UTC: a session expiring in an hour is live
            // whatever the server session's TimeZone.
            try runtime.query("SET TimeZone = 'Asia/Tokyo'")
            #expect(
                try reads(
                    session: session.hash, caregiver: caregiver.uuidString.lowercased(), patient: home.patient,
                    medication: home.scheduled, keys: ("key-1", "key-2")) == [1, 1, 1, 3, 0, 1, 0])
            // Its ids held as the app's text: another caregiver of the app's patient is not linked to it.
            #expect(
                try recordDose(
                    caregiver: UUID().uuidString.lowercased(), patient: home.patient, medication: home.scheduled)
                    == "not-linked")
            #expect(try recordSlot(patient: home.patient) == 0)
            #expect(
                try recordPRN(
                    caregiver: UUID().uuidString.lowercased(), patient: home.patient, medication: home.scheduled,
                    key: "key-1")
                    == "not-linked")
            #expect(
                try owner.query("SELECT patient_id::text FROM caregiver_push.push_events WHERE event_key = 'after'")
                    .single?.decode(String.self, at: 0) == "patient-123")
        }
    }

    @Test("a mapping never drops a household table of the functions' own that holds rows")
    func mappingKeepsRows() throws {
        try Self.withApp { _, owner in
            try Self.migrate(owner, mapping: nil)
            _ = try Seed.patient(owner)
            var message = ""
            do { try Self.migrate(owner, mapping: try Self.mapping) } catch { message = "\(error)" }
            #expect(message.contains("caregiver_push.patients holds rows"), "\(message)")
            #expect(try owner.query("SELECT count(*) FROM caregiver_push.patients")[0].decode(Int.self, at: 0) == 1)
        }
    }
}

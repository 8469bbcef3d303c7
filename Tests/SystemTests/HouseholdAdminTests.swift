import CaregiverPush
import Codecs
import Foundation
import Libpq
import Logging
import Migrations
import ProcessSupervision
import Synchronization
import Testing
import TestSupport

/// Households without an app backend (docs/deploy.md#households): migration 000011's functions, called as the role
/// `caregiver_push_households` through a login of its own, and `gateway households` on top of them.
@Suite("households without an app backend")
struct HouseholdAdminTests {
    static let role = "caregiver_push_households"

    /// The operator's one step (docs/deploy.md#households): the role logs in (the test cluster trusts loopback, so no
    /// password). Once per process: concurrent `ALTER ROLE`s of one role fail with "tuple concurrently updated".
    static let canLogIn: Bool = {
        (try? TestDatabase.with { try $0.query(PostgresQuery(unsafeSQL: "ALTER ROLE \(role) LOGIN")) }) != nil
    }()

    /// `databaseURL` with the households role as its user.
    static func householdsURL(for databaseURL: String) throws -> String {
        try #require(canLogIn, "ALTER ROLE \(role) LOGIN failed")
        var components = try #require(URLComponents(string: databaseURL))
        components.user = role
        components.password = nil
        return try #require(components.string)
    }

    /// A connection as the households role, closed on every path.
    @discardableResult
    static func asHouseholds<T>(_ databaseURL: String = TestDatabase.url, _ body: (PostgresConnection) throws -> T)
        throws -> T
    {
        let connection = try PostgresConnection(url: try householdsURL(for: databaseURL))
        defer { connection.close() }
        return try body(connection)
    }

    /// A household made through the functions alone: a patient, one linked caregiver per entry of
    /// `devicesPerCaregiver` with devices registered through the real registration code, a morning medication at
    /// 07:00 and a PRN one, and a patient session.
    struct Household {
        let patient: UUID
        let caregivers: [(id: UUID, tokens: [String])]
        let morning: UUID
        let prn: UUID
        let session: UUID
        let token: String
        let date = TokyoDay.offset(-1)

        func values(_ extra: [String: String] = [:]) -> [String: String] {
            [
                "PATIENT_TOKEN": token, "MEDICATION_ID": morning.uuidString.lowercased(),
                "SCHEDULED_AT": TokyoDay.instant(date, "07:00"),
            ].merging(extra) { _, new in new }
        }

        func tokens(of index: Int) -> Set<String> { Set(caregivers[index].tokens) }
    }

    static func household(
        _ databaseURL: String = TestDatabase.url, devicesPerCaregiver: [Int] = [1], owner: PostgresConnection
    ) throws -> Household {
        try asHouseholds(databaseURL) { connection in
            let patient = try connection.query("SELECT caregiver_push.household_create_patient('佐藤')")[0]
                .decode(UUID.self, at: 0)
            var caregivers: [(UUID, [String])] = []
            for count in devicesPerCaregiver {
                let caregiver = UUID()
                try connection.query("SELECT caregiver_push.household_link_caregiver(\(patient), \(caregiver))")
                let tokens = (0..<count).map { _ in makeDeviceToken() }
                for token in tokens { try Seed.registerDevice(token, caregiver: caregiver, connection: owner) }
                caregivers.append((caregiver, tokens))
            }
            let morning = try connection.query(
                """
                SELECT caregiver_push.household_add_medication(
                    \(patient), '朝の秘密の薬', false, '2020-01-01', NULL, '{07:00}')
                """
            )[0].decode(UUID.self, at: 0)
            let prn = try connection.query(
                "SELECT caregiver_push.household_add_medication(\(patient), '頓服', true, '2020-01-01', NULL, NULL)"
            )[0].decode(UUID.self, at: 0)
            let issued = try connection.query(
                "SELECT session_id, token FROM caregiver_push.household_issue_patient_session(\(patient), '1 day')")
            let (session, token) = try issued[0].decode((UUID, String).self)
            return Household(
                patient: patient, caregivers: caregivers.map { (id: $0.0, tokens: $0.1) }, morning: morning, prn: prn,
                session: session, token: token)
        }
    }

    /// The database's refusal of `body`.
    static func refusal(_ body: () throws -> Void) -> PostgresError? {
        do {
            try body()
            return nil
        } catch {
            return error as? PostgresError
        }
    }

    @Test("each function does its one thing, as the households role")
    func functionsWork() throws {
        try TestDatabase.with { owner in
            let household = try Self.household(devicesPerCaregiver: [0, 0], owner: owner)
            let (first, second) = (household.caregivers[0].id, household.caregivers[1].id)
            #expect(
                try owner.query("SELECT display_name FROM patients WHERE id = \(household.patient)")[0]
                    .decode(String.self, at: 0) == "佐藤")
            let links = try owner.query(
                "SELECT caregiver_id, revoked_at IS NULL FROM caregiver_patient_links WHERE patient_id = \(household.patient)"
            ).map { try $0.decode((UUID, Bool).self) }
            #expect(Set(links.map(\.0)) == [first, second] && links.allSatisfy(\.1))
            let medications = try owner.query(
                """
                SELECT m.id, m.is_prn, m.start_date::text, m.end_date::text,
                       coalesce(array_to_string(array_agg(t.time_of_day::text ORDER BY t.time_of_day), ','), '')
                FROM medications m LEFT JOIN medication_schedule_times t ON t.medication_id = m.id
                WHERE m.patient_id = \(household.patient) GROUP BY m.id ORDER BY m.is_prn
                """
            ).map { try $0.decode((UUID, Bool, String, String?, String).self) }
            #expect(medications.count == 2)
            #expect(
                medications.first.map { [$0.0 == household.morning, !$0.1, $0.2 == "2020-01-01"] } == [
                    true, true, true,
                ])
            #expect(medications.first?.4 == "07:00:00" && medications.last?.4 == "" && medications.last?.1 == true)
            // The session: the app's token shape, stored only as the SHA-256 of its whole text, for the TTL asked.
            #expect(PatientSessionToken(household.token) != nil, "\(household.token.prefix(4))…")
            let session = try owner.query(
                """
                SELECT token_hash = \(PostgresBytes(PatientSessionToken(household.token)?.hash ?? [])),
                       expires_at - created_at = interval '1 day', revoked_at IS NULL
                FROM patient_sessions WHERE id = \(household.session) AND patient_id = \(household.patient)
                """)
            #expect(try #require(session.single).decode((Bool, Bool, Bool).self) == (true, true, true))

            try Self.asHouseholds { connection in
                // Linking again, archiving and revoking again change nothing more; unlink revokes one link.
                try connection.query("SELECT caregiver_push.household_link_caregiver(\(household.patient), \(first))")
                try connection.query(
                    "SELECT caregiver_push.household_unlink_caregiver(\(household.patient), \(second))")
                for _ in 0..<2 {
                    try connection.query("SELECT caregiver_push.household_archive_medication(\(household.morning))")
                    try connection.query("SELECT caregiver_push.household_revoke_patient_session(\(household.session))")
                }
            }
            let after = try owner.query(
                "SELECT caregiver_id, revoked_at IS NULL FROM caregiver_patient_links WHERE patient_id = \(household.patient)"
            ).map { try $0.decode((UUID, Bool).self) }
            #expect(Dictionary(uniqueKeysWithValues: after) == [first: true, second: false])
            #expect(
                try owner.query(
                    """
                    SELECT (SELECT archived_at IS NOT NULL FROM medications WHERE id = \(household.morning)),
                           (SELECT archived_at IS NULL FROM medications WHERE id = \(household.prn)),
                           (SELECT revoked_at IS NOT NULL FROM patient_sessions WHERE id = \(household.session))
                    """
                )[0].decode((Bool, Bool, Bool).self) == (true, true, true))
            // Linked again after an unlink: active again.
            try Self.asHouseholds { connection in
                try connection.query("SELECT caregiver_push.household_link_caregiver(\(household.patient), \(second))")
            }
            #expect(
                try owner.query(
                    """
                    SELECT revoked_at IS NULL FROM caregiver_patient_links
                    WHERE patient_id = \(household.patient) AND caregiver_id = \(second)
                    """
                )[0].decode(Bool.self, at: 0))
        }
    }

    /// A bad call: the statement, the SQLSTATE and the field its message names.
    struct BadCall: CustomTestStringConvertible, Sendable {
        let sql: String
        let state: String
        let field: String
        var testDescription: String { "\(field): \(sql)" }
    }

    static let unknown = "'00000000-0000-4000-8000-000000000000'"

    /// `:p` is a patient of the database, `:c` a caregiver linked to it.
    static let badCalls: [BadCall] = [
        .init(sql: "household_create_patient('')", state: "22023", field: "display_name"),
        .init(sql: "household_create_patient('   ')", state: "22023", field: "display_name"),
        .init(sql: "household_create_patient(repeat('名', 51))", state: "22023", field: "display_name"),
        .init(sql: "household_create_patient(NULL)", state: "22023", field: "display_name"),
        .init(sql: "household_link_caregiver(\(unknown), :c)", state: "23503", field: "patient"),
        .init(sql: "household_link_caregiver(:p, NULL)", state: "22023", field: "caregiver"),
        .init(sql: "household_unlink_caregiver(:p, \(unknown))", state: "23503", field: "caregiver"),
        .init(sql: "household_unlink_caregiver(\(unknown), :c)", state: "23503", field: "patient"),
        .init(
            sql: "household_add_medication(\(unknown), 'x', false, '2024-01-01', NULL, '{08:00}')", state: "23503",
            field: "patient"),
        .init(
            sql: "household_add_medication(:p, ' ', false, '2024-01-01', NULL, '{08:00}')", state: "22023",
            field: "name"),
        .init(
            sql: "household_add_medication(:p, repeat('x', 201), false, '2024-01-01', NULL, '{08:00}')",
            state: "22023", field: "name"),
        .init(
            sql: "household_add_medication(:p, 'x', NULL, '2024-01-01', NULL, '{08:00}')", state: "22023",
            field: "is_prn"),
        .init(
            sql: "household_add_medication(:p, 'x', false, NULL, NULL, '{08:00}')", state: "22023", field: "start_date"),
        .init(
            sql: "household_add_medication(:p, 'x', false, '2024-02-01', '2024-01-31', '{08:00}')", state: "22023",
            field: "end_date"),
        .init(
            sql: "household_add_medication(:p, 'x', false, '2024-01-01', NULL, '{08:00,12:00:30}')", state: "22023",
            field: "times"),
        .init(
            sql: "household_add_medication(:p, 'x', false, '2024-01-01', NULL, '{08:00,08:00}')", state: "22023",
            field: "times"),
        .init(
            sql: "household_add_medication(:p, 'x', false, '2024-01-01', NULL, '{}')", state: "22023", field: "times"),
        .init(
            sql: "household_add_medication(:p, 'x', false, '2024-01-01', NULL, NULL)", state: "22023", field: "times"),
        .init(
            sql: "household_add_medication(:p, 'x', false, '2024-01-01', NULL, '{08:00,NULL}')", state: "22023",
            field: "times"),
        .init(
            sql: "household_add_medication(:p, 'x', true, '2024-01-01', NULL, '{08:00}')", state: "22023",
            field: "times"),
        .init(sql: "household_archive_medication(\(unknown))", state: "23503", field: "medication"),
        .init(sql: "household_issue_patient_session(\(unknown), '1 day')", state: "23503", field: "patient"),
        .init(sql: "household_issue_patient_session(:p, '0')", state: "22023", field: "ttl"),
        .init(sql: "household_issue_patient_session(:p, '-1 day')", state: "22023", field: "ttl"),
        .init(sql: "household_issue_patient_session(:p, '367 days')", state: "22023", field: "ttl"),
        .init(sql: "household_issue_patient_session(:p, NULL)", state: "22023", field: "ttl"),
        .init(sql: "household_revoke_patient_session(\(unknown))", state: "23503", field: "session"),
    ]

    /// Every row of the household tables, as text, for "nothing changed".
    static func snapshot(_ owner: PostgresConnection) throws -> [String] {
        try [
            "patients", "caregiver_patient_links", "patient_sessions", "medications", "medication_schedule_times",
        ].flatMap { table in
            try owner.query(PostgresQuery(unsafeSQL: "SELECT \(table)::text FROM caregiver_push.\(table) ORDER BY 1"))
                .map { "\(table): " + (try $0.decode(String.self, at: 0)) }
        }
    }

    @Test("bad input is refused with a clear error naming the field, and changes nothing")
    func refusesBadInput() throws {
        let database = try IsolatedDatabase()
        try database.with { owner in
            let household = try Self.household(database.url, devicesPerCaregiver: [0], owner: owner)
            let before = try Self.snapshot(owner)
            try Self.asHouseholds(database.url) { connection in
                for call in Self.badCalls {
                    let sql = call.sql.replacingOccurrences(of: ":p", with: "'\(household.patient.uuidString)'")
                        .replacingOccurrences(of: ":c", with: "'\(household.caregivers[0].id.uuidString)'")
                    let error = Self.refusal {
                        try connection.query(PostgresQuery(unsafeSQL: "SELECT caregiver_push.\(sql)"))
                    }
                    #expect(error?.sqlState?.rawValue == call.state, "\(call.sql): \(String(reflecting: error))")
                    #expect(
                        error?.serverMessage?.hasPrefix(call.field + " ") == true,
                        "\(call.sql): \(error?.serverMessage ?? "no error")")
                }
            }
            #expect(try Self.snapshot(owner) == before)
        }
    }

    @Test("the role reaches only its functions: no table, no DDL, no other routine; the runtime role none of them")
    func leastPrivilege() throws {
        try TestDatabase.with { owner in
            let tables = try owner.query(
                "SELECT relname::text FROM pg_class WHERE relnamespace = 'caregiver_push'::regnamespace AND relkind = 'r'"
            ).map { try $0.decode(String.self, at: 0) }
            #expect(tables.count == ProjectSchema.relations.count)
            let granted = try owner.query(
                """
                SELECT c.relname::text || ' ' || p.privilege FROM pg_class c,
                    unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) AS p(privilege)
                WHERE c.relnamespace = 'caregiver_push'::regnamespace AND c.relkind = 'r'
                  AND has_table_privilege(\(Self.role), c.oid, p.privilege)
                """
            ).map { try $0.decode(String.self, at: 0) }
            #expect(granted.isEmpty, "\(granted)")
            let routines = try owner.query(
                """
                SELECT p.oid::regprocedure::text, has_function_privilege(\(Self.role), p.oid, 'EXECUTE'),
                       has_function_privilege(\(Migrator.runtimeRole), p.oid, 'EXECUTE')
                FROM pg_proc p WHERE p.pronamespace = 'caregiver_push'::regnamespace ORDER BY 1
                """
            ).map { try $0.decode((String, Bool, Bool).self) }
            // regprocedure's text names the schema only when it is not on the search_path (the test cluster's is).
            let executable = Set(
                routines.filter(\.1).map {
                    String($0.0.prefix { $0 != "(" }.replacing("caregiver_push.", with: ""))
                })
            #expect(
                executable == [
                    "household_create_patient", "household_link_caregiver",
                    "household_unlink_caregiver", "household_add_medication",
                    "household_archive_medication", "household_issue_patient_session",
                    "household_revoke_patient_session", "household_delete_patient",
                ])
            #expect(routines.filter { $0.2 && $0.0.contains("household_") }.isEmpty, "\(routines)")
        }
        // And what the server says when it tries.
        try Self.asHouseholds { connection in
            for statement in [
                "SELECT count(*) FROM caregiver_push.patients",
                "SELECT count(*) FROM caregiver_push.push_deliveries",
                "UPDATE caregiver_push.push_deliveries SET status = 'FAILED'",
                "DELETE FROM caregiver_push.push_devices",
                "INSERT INTO caregiver_push.patients (display_name) VALUES ('x')",
                "CREATE TABLE caregiver_push.households_probe (x int)",
                "SELECT caregiver_push.household_check_caller('probe')",
                """
                SELECT * FROM caregiver_push.register_push_device(
                    gen_random_uuid(), 'probe', sha256('probe'::bytea), 'ios', 'DEV', NULL, 10, 20)
                """,
            ] {
                let error = Self.refusal { try connection.query(PostgresQuery(unsafeSQL: statement)) }
                #expect(error?.sqlState?.rawValue == "42501", "\(statement): \(String(reflecting: error))")
            }
        }
        // The runtime role, logged in as the functions are, cannot call them.
        let runtime = try PostgresConnection(url: TestDatabase.runtimeURL)
        defer { runtime.close() }
        let error = Self.refusal { try runtime.query("SELECT caregiver_push.household_create_patient('x')") }
        #expect(error?.sqlState?.rawValue == "42501", "\(String(reflecting: error))")
    }

    @Test("on Supabase: anon and authenticated cannot execute the functions, nor call them when exposed by mistake")
    func closedToTheDataAPI() throws {
        try DataAPIExposureTests.withSupabaseProject { cluster, owner in
            try Migrator(directory: TestDatabase.migrationsDirectory).migrate(owner, logger: Logger(label: "tests"))
            try owner.query(PostgresQuery(unsafeSQL: "ALTER ROLE \(Self.role) LOGIN"))
            let functions = try owner.query(
                "SELECT oid::regprocedure::text FROM pg_proc WHERE proname LIKE 'household\\_%' ORDER BY 1"
            ).map { try $0.decode(String.self, at: 0) }
            #expect(functions.count == 11)
            for role in ["anon", "authenticated", "service_role"] {
                for function in functions {
                    #expect(
                        try !owner.query(
                            "SELECT has_function_privilege(\(role), \(function)::regprocedure, 'EXECUTE')")[
                                0
                            ].decode(Bool.self, at: 0), "\(role) \(function)")
                }
            }
            let patient = try PostgresConnection(url: try Self.householdsURL(for: cluster.url)).withClosing {
                try $0.query("SELECT caregiver_push.household_create_patient('x')")[0].decode(UUID.self, at: 0)
            }
            // Exposed by mistake, the routines are granted to the API roles; PostgREST logs in as `authenticator` and
            // switches to them: the functions refuse that session.
            try SupabaseProject.exposeSchemaByMistake(owner, schema: "caregiver_push")
            let before = try Self.snapshot(owner)
            let authenticator = try PostgresConnection(
                url: cluster.url.replacingOccurrences(of: "postgres@", with: "authenticator@"))
            defer { authenticator.close() }
            for role in ["anon", "authenticated"] {
                for call in [
                    "household_create_patient('x')", "household_issue_patient_session('\(patient)', '1 day')",
                    "household_link_caregiver('\(patient)', gen_random_uuid())",
                ] {
                    try authenticator.query(PostgresQuery(unsafeSQL: "SET ROLE \(role)"))
                    let error = Self.refusal {
                        try authenticator.query(PostgresQuery(unsafeSQL: "SELECT * FROM caregiver_push.\(call)"))
                    }
                    #expect(error?.sqlState?.rawValue == "42501", "\(role) \(call): \(String(reflecting: error))")
                    #expect(
                        error?.serverMessage?.hasSuffix("is for the role caregiver_push_households") == true,
                        "\(role) \(call): \(String(reflecting: error))")
                    try authenticator.query("RESET ROLE")
                }
            }
            #expect(try Self.snapshot(owner) == before)
        }
    }

    @Test(
        "a session the function issues authenticates dose-record through the built executable; revoked, it is refused")
    func issuedSessionAuthenticates() throws {
        let household = try TestDatabase.with { try Self.household(devicesPerCaregiver: [0], owner: $0) }
        let recorded = try Executables.run(
            "dose-record", input: try Executables.fixture("dose-record/patient.json", household.values()))
        #expect(recorded.response?.statusCode == 200, "\(recorded.stderr)")
        #expect(recorded.body?["updatedCount"] == .number(1), "\(recorded.stderr)")
        try Self.asHouseholds { connection in
            try connection.query("SELECT caregiver_push.household_revoke_patient_session(\(household.session))")
        }
        let refused = try Executables.run(
            "dose-record",
            input: try Executables.fixture(
                "dose-record/patient.json",
                household.values(["SCHEDULED_AT": TokyoDay.instant(TokyoDay.offset(-2), "07:00")])))
        #expect(refused.response?.statusCode == 401, "\(refused.stderr)")
        #expect(refused.stderr.contains("unknownPatientSession"))
    }

    /// The deliveries of `caregiver`'s devices for the patient's events: status → count.
    static func deliveries(_ owner: PostgresConnection, patient: UUID, caregiver: UUID) throws -> [String: Int] {
        Dictionary(
            uniqueKeysWithValues: try owner.query(
                """
                SELECT p.status, count(*)::int FROM push_deliveries p
                JOIN push_events e ON e.event_key = p.event_key JOIN push_devices d ON d.id = p.push_device_id
                WHERE e.patient_id = \(patient) AND d.owner_id = \(caregiver) GROUP BY p.status
                """
            ).map { try $0.decode((String, Int).self) })
    }

    @Test(
        "unlinking stops a caregiver's pushes at once: nothing queued is sent to them, a new recording owes them none")
    func unlinkStopsQueuedPushes() throws {
        let database = try IsolatedDatabase()
        let fake = try FCMFake()
        try database.with { owner in
            let household = try Self.household(database.url, devicesPerCaregiver: [2, 1], owner: owner)
            let (unlinked, kept) = (household.caregivers[0].id, household.caregivers[1].id)
            // Recorded while no service account is set: the deliveries stay PENDING (docs/deploy.md).
            let queued = try Executables.run(
                "dose-record", input: try Executables.fixture("dose-record/patient.json", household.values()),
                environment: testEnvironment(["DATABASE_URL": database.runtimeURL]))
            #expect(queued.body?["updatedCount"] == .number(1), "\(queued.stderr)")
            #expect(try Self.deliveries(owner, patient: household.patient, caregiver: unlinked) == ["PENDING": 2])

            let stopped = try Self.asHouseholds(database.url) { connection in
                try connection.query(
                    "SELECT caregiver_push.household_unlink_caregiver(\(household.patient), \(unlinked))")[0]
                    .decode(Int.self, at: 0)
            }
            #expect(stopped == 2)
            #expect(try Self.deliveries(owner, patient: household.patient, caregiver: unlinked) == ["FAILED": 2])
            #expect(try Self.deliveries(owner, patient: household.patient, caregiver: kept) == ["PENDING": 1])

            // The sweep sends what is owed: to the caregiver still linked only.
            let sweep = try Executables.run(
                "push-sweep", input: Data("{}".utf8), environment: fake.environment(database))
            #expect(sweep.result.exitStatus == 0, "\(sweep.stderr)")
            #expect(try fake.messages(to: household.tokens(of: 1)).count == 1)
            #expect(try fake.messages(to: household.tokens(of: 0)).isEmpty)

            // A new recording owes the unlinked caregiver nothing.
            let prn = try Executables.run(
                "prn-record",
                input: try Executables.fixture(
                    "prn-record/patient.json",
                    household.values([
                        "MEDICATION_ID": household.prn.uuidString.lowercased(), "IDEMPOTENCY_KEY": UUID().uuidString,
                    ])),
                environment: fake.environment(database))
            #expect(prn.body?["updatedCount"] == .number(1), "\(prn.stderr)")
            #expect(try fake.messages(to: household.tokens(of: 1)).count == 2)
            #expect(try fake.messages(to: household.tokens(of: 0)).isEmpty)
            #expect(try Self.deliveries(owner, patient: household.patient, caregiver: unlinked) == ["FAILED": 2])
        }
    }

    /// What a call made on another thread returned, once it has.
    final class Finished: Sendable {
        let stopped = Mutex<Int?>(nil)
        let failure = Mutex<String?>(nil)
        let done = Mutex(false)

        /// Whether it returned within `seconds`.
        func wait(_ seconds: Double) -> Bool {
            let deadline = Date().addingTimeInterval(seconds)
            while !done.withLock({ $0 }) && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
            return done.withLock { $0 }
        }
    }

    @Test("an unlink waits for a recording of the patient in flight, then stops what that recording queued")
    func unlinkWaitsForRecordingInFlight() throws {
        try TestDatabase.with { owner in
            let household = try Self.household(devicesPerCaregiver: [1], owner: owner)
            let caregiver = household.caregivers[0].id
            // A recording's transaction, as RecordingTransaction runs one: its dose row (whose foreign key locks the
            // medication's row), then the statement that reads the links and queues the push; not committed yet.
            let recording = try TestDatabase.connect()
            defer { recording.close() }
            try recording.query("BEGIN")
            let takenAt = Date()
            try recording.query(
                """
                INSERT INTO dose_records (patient_id, medication_id, scheduled_at, taken_at, recorded_by_role, recorded_by_id)
                VALUES (\(household.patient), \(household.morning), \(takenAt), \(takenAt), 'PATIENT', \(household.patient))
                """)
            let event = DoseTakenEvent(
                patientID: AppID(household.patient), date: TokyoClock.dateString(of: takenAt), slot: .morning,
                recordingGroupID: nil, takenAt: takenAt, withinTime: true, actingCaregiverID: nil)
            #expect(
                try PushOutbox.enqueue(event, source: .doseRecord, environment: .development, connection: recording)
                    == 1)

            let unlink = Finished()
            let url = try Self.householdsURL(for: TestDatabase.url)
            let patient = household.patient
            Thread.detachNewThread {
                do {
                    let connection = try PostgresConnection(url: url)
                    defer { connection.close() }
                    let stopped = try connection.query(
                        "SELECT caregiver_push.household_unlink_caregiver(\(patient), \(caregiver))"
                    )[0].decode(Int.self, at: 0)
                    unlink.stopped.withLock { $0 = stopped }
                } catch {
                    unlink.failure.withLock { $0 = String(reflecting: error) }
                }
                unlink.done.withLock { $0 = true }
            }
            #expect(!unlink.wait(1), "the unlink did not wait for the recording")
            try recording.query("COMMIT")
            #expect(unlink.wait(30))
            #expect(unlink.failure.withLock { $0 } == nil)
            #expect(unlink.stopped.withLock { $0 } == 1)
            #expect(try Self.deliveries(owner, patient: household.patient, caregiver: caregiver) == ["FAILED": 1])
        }
    }

    /// `gateway households …` with DATABASE_URL as given.
    static func gateway(_ arguments: [String], databaseURL: String?) throws -> ChildProcess.Result {
        let executable = Executables.binDirectory.appendingPathComponent("gateway")
        try #require(FileManager.default.isExecutableFile(atPath: executable.path), "build first: \(executable.path)")
        return try ChildProcess.run(
            executable: executable, arguments: ["households"] + arguments,
            environment: databaseURL.map { ["DATABASE_URL": $0] } ?? [:], input: Data())
    }

    @Test(
        "gateway households, end to end: create, link, add, issue, unlink, revoke, delete; an error is one line and exit 1"
    )
    func gatewayCommand() throws {
        let url = try Self.householdsURL(for: TestDatabase.url)
        func run(_ arguments: [String]) throws -> [String] {
            let result = try Self.gateway(arguments, databaseURL: url)
            let stderr = String(decoding: result.standardError, as: UTF8.self)
            #expect(result.exitStatus == 0, "\(arguments.first ?? ""): \(stderr)")
            return String(decoding: result.standardOutput, as: UTF8.self).split(separator: "\n").map(String.init)
        }
        let patient = try #require(UUID(uuidString: try run(["create-patient", "--name", "高橋"]).first ?? ""))
        let caregiver = UUID()
        let ids = [patient, caregiver].map { $0.uuidString.lowercased() }
        #expect(
            try run(["link", "--patient", ids[0], "--caregiver", ids[1]]) == [
                "linked caregiver \(ids[1]) to patient \(ids[0])"
            ])
        let medication = try #require(
            UUID(
                uuidString: try run([
                    "add-medication", "--patient", ids[0], "--name", "夜の薬", "--start", "2024-01-01", "--end",
                    "2030-12-31", "--times", "08:00,21:30",
                ]).first ?? ""))
        let prn = try #require(
            UUID(
                uuidString: try run([
                    "add-medication", "--patient", ids[0], "--name", "頓服", "--prn", "--start", "2024-01-01",
                ]).first ?? ""))
        let issued = try run(["issue-session", "--patient", ids[0], "--ttl", "30 days"])
        #expect(issued.count == 2 && issued[0].hasPrefix("session ") && issued[1].hasPrefix("token pst_"))
        let session = try #require(UUID(uuidString: String(issued.first?.dropFirst("session ".count) ?? "")))
        let token = String(issued.last?.dropFirst("token ".count) ?? "")
        #expect(
            try run(["unlink", "--patient", ids[0], "--caregiver", ids[1]]).first?.hasSuffix(
                "; 0 queued deliveries stopped") == true)
        #expect(try run(["archive-medication", "--medication", prn.uuidString]).count == 1)
        #expect(try run(["revoke-session", "--session", session.uuidString]).count == 1)
        try TestDatabase.with { owner in
            let state = try owner.query(
                """
                SELECT (SELECT display_name FROM patients WHERE id = \(patient)),
                       (SELECT revoked_at IS NOT NULL FROM caregiver_patient_links
                        WHERE patient_id = \(patient) AND caregiver_id = \(caregiver)),
                       (SELECT string_agg(time_of_day::text, ',' ORDER BY time_of_day) FROM medication_schedule_times
                        WHERE medication_id = \(medication)),
                       (SELECT end_date::text FROM medications WHERE id = \(medication)),
                       (SELECT archived_at IS NOT NULL FROM medications WHERE id = \(prn)),
                       (SELECT token_hash = \(PostgresBytes(PatientSessionToken(token)?.hash ?? [])) AND revoked_at IS NOT NULL
                        FROM patient_sessions WHERE id = \(session))
                """)
            #expect(
                try state[0].decode((String, Bool, String, String, Bool, Bool).self)
                    == ("高橋", true, "08:00:00,21:30:00", "2030-12-31", true, true))
        }
        // The function's refusal, one line on stderr, exit status 1, nothing on stdout.
        for (arguments, message) in [
            (
                ["create-patient", "--name", ""],
                "Error: display_name must be 1 to 50 characters and not blank (SQLSTATE 22023)"
            ),
            (
                [
                    "add-medication", "--patient", ids[0], "--name", "x", "--start", "2024-02-01", "--end",
                    "2024-01-01", "--times", "08:00",
                ],
                "Error: end_date must be on or after start_date (SQLSTATE 22023)"
            ),
            (
                ["revoke-session", "--session", "not-a-uuid"],
                "Error: invalid input syntax for type uuid: \"not-a-uuid\" (SQLSTATE 22P02)"
            ),
        ] {
            let result = try Self.gateway(arguments, databaseURL: url)
            let stderr = String(decoding: result.standardError, as: UTF8.self)
            #expect(result.exitStatus == 1, "\(arguments)")
            #expect(stderr == message + "\n", "\(arguments)")
            #expect(result.standardOutput.isEmpty)
        }
        let unset = try Self.gateway(["create-patient", "--name", "x"], databaseURL: nil)
        #expect(
            unset.exitStatus == 1
                && String(decoding: unset.standardError, as: UTF8.self) == "Error: DATABASE_URL is not set\n")
        // Deleting the patient takes everything of theirs; a second time there is nothing to delete.
        #expect(try run(["delete-patient", "--patient", ids[0]]) == ["deleted patient \(ids[0])"])
        #expect(try run(["delete-patient", "--patient", ids[0]]) == ["no patient \(ids[0])"])
        try TestDatabase.with { owner in
            let left = try owner.query(
                """
                SELECT (SELECT count(*) FROM medications WHERE patient_id = \(patient))
                     + (SELECT count(*) FROM patient_sessions WHERE patient_id = \(patient))
                     + (SELECT count(*) FROM caregiver_patient_links WHERE patient_id = \(patient))
                """)
            #expect(try left[0].decode(Int.self, at: 0) == 0)
        }
    }
}

extension PostgresConnection {
    /// `body` with this connection, closed on every path.
    fileprivate func withClosing<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        defer { close() }
        return try body(self)
    }
}

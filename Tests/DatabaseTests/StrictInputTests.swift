import Codecs
import Libpq
import JOSE
import CaregiverPush
import Foundation
import Synchronization
import Testing
import TestFixtures
import TestSupport

/// Identifiers are exact, the event envelope is parsed strictly, and the database layer neither truncates nor waits
/// without bound.
@Suite("strict input and bounded database work", .timeLimit(.minutes(2)))
struct StrictInputTests {
    static let endpoints: [any Endpoint] = [
        PushRegister(), PushUnregister(), DoseRecord(), SlotBulkRecord(), PrnRecord(),
    ]

    /// A caregiver token whose `sub` is exactly `subject`, signed with the test secret.
    static func token(subject: String) throws -> String {
        let now = Date().timeIntervalSince1970.rounded(.down)
        return try JWTSigner.sign(
            header: [:],
            claims: [
                "sub": .string(subject), "aud": .string("authenticated"), "role": .string("authenticated"),
                "exp": .number(now + 3600), "iat": .number(now), "is_anonymous": .bool(false),
            ],
            using: .hmac(secret: Array(testJWTSecret.utf8)))
    }

    static func count(_ sql: PostgresQuery) throws -> Int {
        try TestDatabase.with { try $0.query(sql).single?.decode(Int.self, at: 0) ?? -1 }
    }

    @Test("the endpoints checked here are every routed function of infra/functions.json")
    func endpointsAreTheRoutedFunctions() throws {
        let table = try JSONValue.parse(
            String(contentsOf: Repository.root.appendingPathComponent("infra/functions.json"), encoding: .utf8))
        let routed = (table["functions"]?.arrayValue ?? []).filter { $0["path"] != nil }.compactMap {
            $0["name"]?.stringValue
        }
        #expect(!routed.isEmpty)
        #expect(Set(Self.endpoints.map(\.functionName)) == Set(routed))
    }

    @Test("UUID(exactly:) takes 36 ASCII characters of the UUID grammar and nothing else")
    func exactUUID() {
        let text = "6f1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5f"
        #expect(UUID(exactly: text) == UUID(uuidString: text))
        #expect(UUID(exactly: text.uppercased()) != nil)
        for bad in [
            text + "\u{0}x", text + "\u{0}", "\u{0}" + text, text + " ", " " + text, "{\(text)}",
            String(text.dropLast()),
            text.replacingOccurrences(of: "-", with: ""), text.replacingOccurrences(of: "6f1c", with: "6g1c"),
            text.replacingOccurrences(of: "-8d3b", with: "8-d3b"), "",
        ] {
            #expect(UUID(exactly: bad) == nil)
        }
        // The leniency this replaces: C's parser stops at the NUL.
        #expect(UUID(uuidString: text + "\u{0}x") != nil)
    }

    @Test("an id that is a UUID has one text, lower-case as PostgreSQL prints it; any other id stays as written")
    func appIDText() {
        for _ in 0..<100 {
            let uuid = UUID()
            #expect(AppID(uuid.uuidString)?.text == uuid.uuidString.lowercased())
            #expect(AppID(uuid.uuidString.lowercased())?.text == uuid.uuidString.lowercased())
            #expect(AppID(uuid).text == uuid.uuidString.lowercased())
        }
        let mixed = "6F1C2A4E-8d3b-4C5A-9E7F-0A1B2C3D4E5F"
        #expect(AppID(mixed)?.text == mixed.lowercased())
        for kept in [
            "Patient-ABC", mixed + "0", String(mixed.dropLast()), mixed.replacingOccurrences(of: "E-8d", with: "E8-d"),
            mixed.replacingOccurrences(of: "6F1C", with: "6G1C"), "ABCDEF",
        ] {
            #expect(AppID(kept)?.text == kept, "\(kept)")
        }
    }

    @Test("a caregiver JWT whose sub is a UUID followed by NUL and more is refused by every function")
    func nulInSubject() throws {
        let household = try RecordingHousehold.make(devicesPerCaregiver: [1])
        let caregiver = household.caregivers[0].id.uuidString.lowercased()
        let forged = try Self.token(subject: caregiver + "\u{0}x")
        let deviceToken = makeDeviceToken()
        let body = json([
            "token": .string(deviceToken), "platform": .string("ios"), "environment": .string("DEV"),
            "patientId": .string(household.patient.uuidString.lowercased()),
            "medicationId": .string(household.morning[0].uuidString.lowercased()),
            "scheduledAt": .string(TokyoDay.instant(household.date, "07:00")), "date": .string(household.date),
            "slot": .string("morning"),
        ])
        for endpoint in Self.endpoints {
            let answer = invoke(endpoint, event: makeEvent(bearer: forged, body: body))
            #expect(answer.status == 401, "\(endpoint.functionName)")
            #expect(answer.response.headers["www-authenticate"] == "Bearer")
        }
        #expect(try Self.count("SELECT count(*)::int FROM push_devices WHERE token = \(deviceToken)") == 0)
        #expect(try Self.count("SELECT count(*)::int FROM dose_records WHERE patient_id = \(household.patient)") == 0)
        #expect(
            try Self.count("SELECT count(*)::int FROM prn_dose_records WHERE patient_id = \(household.patient)") == 0)
        // The same token with the exact subject works: only the NUL made the difference.
        let exact = try Self.token(subject: caregiver)
        #expect(invoke(PushRegister(), event: makeEvent(bearer: exact, body: body)).status == 200)
    }

    @Test("patientId, medicationId and Idempotency-Key with a NUL suffix are 422, and nothing is stored")
    func nulInIdentifiers() throws {
        let household = try RecordingHousehold.make(devicesPerCaregiver: [1])
        let caregiver = try caregiverToken(household.caregivers[0].id)
        let patient = household.patient.uuidString.lowercased()
        let medication = household.morning[0].uuidString.lowercased()
        let scheduledAt = TokyoDay.instant(household.date, "07:00")
        let cases: [(any Endpoint, [String: JSONValue], String)] = [
            (
                DoseRecord(),
                [
                    "patientId": .string(patient + "\u{0}x"), "medicationId": .string(medication),
                    "scheduledAt": .string(scheduledAt),
                ], "patientId"
            ),
            (
                DoseRecord(),
                [
                    "patientId": .string(patient), "medicationId": .string(medication + "\u{0}"),
                    "scheduledAt": .string(scheduledAt),
                ], "medicationId"
            ),
            (
                SlotBulkRecord(),
                [
                    "patientId": .string(patient + "\u{0}zzz"), "date": .string(household.date),
                    "slot": .string("morning"),
                ], "patientId"
            ),
            (
                PrnRecord(),
                [
                    "patientId": .string(patient + "\u{0}x"),
                    "medicationId": .string(household.prn.uuidString.lowercased()),
                ], "patientId"
            ),
            (
                PrnRecord(),
                [
                    "patientId": .string(patient),
                    "medicationId": .string(household.prn.uuidString.lowercased() + "\u{0}x"),
                ], "medicationId"
            ),
        ]
        for (endpoint, body, field) in cases {
            let answer = invoke(endpoint, event: makeEvent(bearer: caregiver, body: json(body)))
            #expect(answer.status == 422, "\(endpoint.functionName) \(field)")
            let fields = answer.json?["errors"]?.arrayValue?.compactMap { $0["field"]?.stringValue } ?? []
            #expect(fields == [field], "\(endpoint.functionName)")
        }
        // An Idempotency-Key of K\0zzz is not the key K.
        let key = UUID().uuidString.lowercased()
        let prnBody = json([
            "patientId": .string(patient), "medicationId": .string(household.prn.uuidString.lowercased()),
        ])
        let nulKey = invoke(
            PrnRecord(),
            event: makeEvent(bearer: caregiver, body: prnBody, extraHeaders: ["idempotency-key": key + "\u{0}zzz"]))
        #expect(nulKey.status == 422)
        #expect(nulKey.json?["errors"]?.arrayValue?.first?["field"] == .string("Idempotency-Key"))
        #expect(try Self.count("SELECT count(*)::int FROM dose_records WHERE patient_id = \(household.patient)") == 0)
        #expect(
            try Self.count("SELECT count(*)::int FROM prn_dose_records WHERE patient_id = \(household.patient)") == 0)
        let realKey = invoke(
            PrnRecord(), event: makeEvent(bearer: caregiver, body: prnBody, extraHeaders: ["idempotency-key": key]))
        #expect(realKey.status == 200)
    }

    @Test("an event with a duplicate member name is a 400, and nothing is stored")
    func duplicateMembersInEvent() throws {
        let caregiver = try caregiverToken(UUID())
        let deviceToken = makeDeviceToken()
        let body = json(["token": .string(deviceToken), "platform": .string("ios"), "environment": .string("DEV")])
        let valid = String(decoding: makeEvent(bearer: caregiver, body: body), as: UTF8.self)
        // The same event with `body` given twice: a lenient parser would keep one of them.
        let duplicated = String(valid.dropLast()) + #","body":"{}"}"#
        let answer = invoke(PushRegister(), event: Data(duplicated.utf8))
        #expect(answer.status == 400)
        #expect(answer.json?["detail"] == .string("The invocation event names a member more than once."))
        #expect(try Self.count("SELECT count(*)::int FROM push_devices WHERE token = \(deviceToken)") == 0)
        // Nested duplicates count too.
        let nested = valid.replacingOccurrences(
            of: #""requestContext":{"#, with: #""requestContext":{"stage":"a","stage":"b","#)
        #expect(nested != valid)
        #expect(invoke(PushRegister(), event: Data(nested.utf8)).status == 400)
        // And the untouched event is fine.
        #expect(invoke(PushRegister(), event: Data(valid.utf8)).status == 200)
    }

    @Test("headers naming one field twice in different letter case are a 400, whichever comes first")
    func mixedCaseHeaders() throws {
        let caregiver = try caregiverToken(UUID())
        let body = json([
            "token": .string(makeDeviceToken()), "platform": .string("ios"), "environment": .string("DEV"),
        ])
        for (first, second) in [("Authorization", "authorization"), ("authorization", "AUTHORIZATION")] {
            for (good, bad) in [("Bearer \(caregiver)", "Bearer nonsense"), ("Bearer nonsense", "Bearer \(caregiver)")]
            {
                let event = makeEvent(bearer: nil, body: body, extraHeaders: [first: good, second: bad])
                let answer = invoke(PushRegister(), event: event)
                #expect(answer.status == 400)
                #expect(
                    answer.json?["detail"]
                        == .string(
                            "The invocation event's headers hold one name more than once in different letter case."))
            }
        }
        // One spelling, in any case, is fine.
        let single = makeEvent(bearer: nil, body: body, extraHeaders: ["AUTHORIZATION": "Bearer \(caregiver)"])
        #expect(invoke(PushRegister(), event: single).status == 200)
    }

    @Test("an unparseable DATABASE_URL is a 500 naming the variable in the log, not a 503")
    func unparseableDatabaseURL() throws {
        let caregiver = try caregiverToken(UUID())
        let body = json([
            "token": .string(makeDeviceToken()), "platform": .string("ios"), "environment": .string("DEV"),
        ])
        for url in ["postgresql://%zz@127.0.0.1/db", "host=127.0.0.1 port", "postgresql://[::1/db"] {
            let answer = invoke(
                PushRegister(), event: makeEvent(bearer: caregiver, body: body),
                environment: testEnvironment(["DATABASE_URL": url]))
            #expect(answer.status == 500, "\(url)")
            #expect(answer.response.headers["retry-after"] == nil)
            #expect(answer.log.contains(#""config.variable":"DATABASE_URL""#))
            #expect(!answer.log.contains(url))
        }
        // A well-formed URL of a database that is not there is still an outage.
        let down = invoke(
            PushRegister(), event: makeEvent(bearer: caregiver, body: body),
            environment: testEnvironment(["DATABASE_URL": "postgresql://postgres@127.0.0.1:1/none?connect_timeout=2"]))
        #expect(down.status == 503 && down.response.headers["retry-after"] != nil)
    }

    @Test("a bind or SQL holding a NUL is refused before anything is sent; nothing is stored")
    func nulInBind() throws {
        try TestDatabase.with { connection in
            let table = "nul_probe_\(UUID().uuidString.prefix(8).lowercased())"
            try connection.query(PostgresQuery(unsafeSQL: "CREATE TABLE \(table) (value text)"))
            defer { _ = try? connection.query(PostgresQuery(unsafeSQL: "DROP TABLE \(table)")) }
            var refused: PostgresError?
            do {
                try connection.query(
                    PostgresQuery(unsafeSQL: "INSERT INTO \(table) VALUES ($1)", binds: ["abc\u{0}def"]))
            } catch let error as PostgresError {
                refused = error
            }
            #expect(refused?.code == .invalidParameter)
            #expect(
                try connection.query(PostgresQuery(unsafeSQL: "SELECT count(*)::int FROM \(table)")).single?.decode(
                    Int.self, at: 0) == 0)
            // The connection is still usable, and a value without a NUL is stored whole.
            try connection.query(PostgresQuery(unsafeSQL: "INSERT INTO \(table) VALUES ($1)", binds: ["abc def"]))
            #expect(
                try connection.query(PostgresQuery(unsafeSQL: "SELECT value FROM \(table)")).single?.decode(
                    String.self, at: 0) == "abc def")
        }
    }

    @Test("a request meeting a row lock held elsewhere answers 503 with Retry-After once lock_timeout passes")
    func rowLockIsBounded() throws {
        let household = try RecordingHousehold.make(devicesPerCaregiver: [1])
        let scheduledAt = TokyoDay.instant(household.date, "07:00")
        let holder = try TestDatabase.connect()
        defer { holder.close() }
        // Another session has inserted the same dose and not committed: our insert must wait for it.
        try holder.query("BEGIN")
        try holder.query(
            """
            INSERT INTO dose_records (patient_id, medication_id, scheduled_at, taken_at, recorded_by_role, recorded_by_id)
            VALUES (\(household.patient), \(household.morning[0]), \(scheduledAt)::timestamptz, now(), 'PATIENT', \(household.patient))
            """)
        let body = json([
            "medicationId": .string(household.morning[0].uuidString.lowercased()), "scheduledAt": .string(scheduledAt),
        ])
        // A watchdog ends the holder's session after 30 s, so that a function waiting without bound fails this test
        // instead of hanging it (a blocked libpq call cannot be interrupted by the test's time limit).
        let holderPID = try holder.query("SELECT pg_backend_pid()").single?.decode(Int.self, at: 0) ?? 0
        let released = Atomic<Bool>(false)
        let watchdog = DispatchWorkItem {
            released.store(true, ordering: .relaxed)
            _ = try? TestDatabase.with { try $0.query("SELECT pg_terminate_backend(\(holderPID))") }
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + 30, execute: watchdog)
        let answer = invoke(
            DoseRecord(), event: makeEvent(bearer: household.patientToken, body: body),
            environment: testEnvironment(["DATABASE_LOCK_TIMEOUT_MS": "300"]))
        watchdog.cancel()
        // Answered while the other session still held the lock: the function did not wait for it.
        let wasReleased = released.load(ordering: .relaxed)
        #expect(!wasReleased)
        #expect(answer.status == 503)
        #expect(answer.response.headers["retry-after"] == "5")
        #expect(answer.log.contains(#""db.sqlstate":"55P03""#))
        _ = try? holder.query("ROLLBACK")
        // Once the other session is gone, the same request records the dose.
        let again = invoke(DoseRecord(), event: makeEvent(bearer: household.patientToken, body: body))
        #expect(again.status == 200 && again.json?["updatedCount"] == .number(1))
    }

    @Test(
        "a transaction that fails once with 40001 or 40P01 is run again and answered 200",
        arguments: ["40001", "40P01"])
    func conflictIsRetried(sqlState: String) throws {
        let household = try RecordingHousehold.make(devicesPerCaregiver: [1])
        let suffix = UUID().uuidString.prefix(8).lowercased()
        let (sequence, function, trigger) = ("fail_once_\(suffix)", "fail_once_\(suffix)_fn", "fail_once_\(suffix)_tr")
        // The first insert of this patient's dose fails with the SQLSTATE; a sequence, which a rollback does not
        // undo, remembers that it did.
        try TestDatabase.with { connection in
            try connection.executeScript(
                PostgresQuery(
                    unsafeSQL: """
                        CREATE SEQUENCE \(sequence);
                        CREATE FUNCTION \(function)() RETURNS trigger LANGUAGE plpgsql AS $$
                        BEGIN
                          IF NEW.patient_id = '\(household.patient.uuidString.lowercased())' AND nextval('caregiver_push.\(sequence)') = 1 THEN
                            RAISE EXCEPTION 'injected conflict' USING ERRCODE = '\(sqlState)';
                          END IF;
                          RETURN NEW;
                        END $$;
                        CREATE TRIGGER \(trigger) BEFORE INSERT ON dose_records FOR EACH ROW EXECUTE FUNCTION \(function)();
                        GRANT USAGE ON SEQUENCE \(sequence) TO caregiver_push_runtime;
                        """))
        }
        defer {
            _ = try? TestDatabase.with { connection in
                try connection.executeScript(
                    PostgresQuery(
                        unsafeSQL:
                            "DROP TRIGGER \(trigger) ON dose_records; DROP FUNCTION \(function)(); DROP SEQUENCE \(sequence);"
                    ))
            }
        }
        let body = json([
            "medicationId": .string(household.morning[0].uuidString.lowercased()),
            "scheduledAt": .string(TokyoDay.instant(household.date, "07:00")),
        ])
        let answer = invoke(DoseRecord(), event: makeEvent(bearer: household.patientToken, body: body))
        #expect(answer.status == 200 && answer.json?["updatedCount"] == .number(1))
        #expect(answer.log.contains("transaction conflict, retrying"))
        #expect(answer.log.contains(#""db.sqlstate":"\#(sqlState)""#))
        #expect(try Self.count("SELECT count(*)::int FROM dose_records WHERE patient_id = \(household.patient)") == 1)
        // The trigger really fired once: the sequence was drawn for the failed and for the successful attempt.
        #expect(try Self.count(PostgresQuery(unsafeSQL: "SELECT last_value::int FROM \(sequence)")) == 2)
    }
}

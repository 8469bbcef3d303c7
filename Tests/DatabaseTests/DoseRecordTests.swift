import Codecs
import CaregiverPush
import Foundation
import Testing
import TestFixtures
import TestSupport

/// dose-record in-process against the real database (docs/behaviour.md#dose-record, docs/behaviour.md#dose-rules).
@Suite("dose-record")
struct DoseRecordTests {
    struct Fixture {
        let patient: UUID
        let patientToken: String
        let caregiver: UUID
        let medication: UUID
        let date: String
    }

    static func fixture(times: [String] = ["08:00", "20:00"]) throws -> Fixture {
        try TestDatabase.with { connection in
            let patient = try Seed.patient(connection)
            let caregiver = UUID()
            try Seed.link(connection, caregiver: caregiver, patient: patient)
            return Fixture(
                patient: patient, patientToken: try Seed.session(connection, patient: patient), caregiver: caregiver,
                medication: try Seed.medication(connection, patient: patient, times: times), date: TokyoDay.offset(-1))
        }
    }

    static func record(_ bearer: String, _ body: [String: JSONValue]) -> Invocation {
        invoke(DoseRecord(), event: makeEvent(path: "/api/dose-records", bearer: bearer, body: json(body)))
    }

    static func body(_ fixture: Fixture, time: String = "08:00", takenAt: String? = nil, patient: UUID? = nil)
        -> [String: JSONValue]
    {
        var body: [String: JSONValue] = [
            "medicationId": .string(fixture.medication.uuidString),
            "scheduledAt": .string(TokyoDay.instant(fixture.date, time)),
        ]
        if let takenAt { body["takenAt"] = .string(takenAt) }
        if let patient { body["patientId"] = .string(patient.uuidString) }
        return body
    }

    @Test("a patient records its own scheduled dose: 200 with the record and updatedCount 1")
    func patientRecords() throws {
        let fixture = try Self.fixture()
        let result = Self.record(
            fixture.patientToken, Self.body(fixture, takenAt: TokyoDay.instant(fixture.date, "08:30")))
        #expect(result.status == 200)
        let record = try #require(result.json?["record"])
        #expect(result.json?["updatedCount"] == .number(1))
        #expect(record["patientId"] == .string(fixture.patient.uuidString.lowercased()))
        #expect(record["medicationId"] == .string(fixture.medication.uuidString.lowercased()))
        #expect(
            record["scheduledAt"]
                == .string(
                    Timestamp.rfc3339UTC(try #require(Timestamp.parseRFC3339(TokyoDay.instant(fixture.date, "08:00")))))
        )
        #expect(record["date"] == .string(fixture.date))
        #expect(record["slot"] == .string("morning"))
        #expect(record["withinTime"] == .bool(true))
        #expect(record["recordingGroupId"] == .null)
        let stored = try TestDatabase.with {
            try $0.query(
                "SELECT recorded_by_role, recorded_by_id FROM dose_records WHERE patient_id = \(fixture.patient)")
        }
        let row = try #require(stored.single)
        #expect(try row.decode((String, UUID).self) == ("PATIENT", fixture.patient))
    }

    @Test("recording the same dose again returns the existing record with updatedCount 0")
    func repeatIsIdempotent() throws {
        let fixture = try Self.fixture()
        let first = Self.record(fixture.patientToken, Self.body(fixture))
        let second = Self.record(
            fixture.patientToken, Self.body(fixture, takenAt: TokyoDay.instant(fixture.date, "09:59")))
        #expect(first.json?["updatedCount"] == .number(1))
        #expect(second.status == 200 && second.json?["updatedCount"] == .number(0))
        #expect(second.json?["record"]?["id"] == first.json?["record"]?["id"])
        #expect(second.json?["record"]?["takenAt"] == first.json?["record"]?["takenAt"])
        #expect(
            try TestDatabase.with { try $0.query("SELECT 1 FROM dose_records WHERE patient_id = \(fixture.patient)") }
                .count == 1)
    }

    @Test(
        "withinTime is takenAt <= scheduledAt + 60 minutes, exactly at the boundary too",
        arguments: [("09:00:00", true), ("09:00:01", false), ("07:00:00", true), ("23:00:00", false)])
    func withinTime(takenTime: String, expected: Bool) throws {
        let fixture = try Self.fixture()
        let takenAt = "\(fixture.date)T\(takenTime)+09:00"
        let result = Self.record(fixture.patientToken, Self.body(fixture, takenAt: takenAt))
        #expect(result.json?["record"]?["withinTime"] == .bool(expected))
    }

    @Test("a linked caregiver records for the patient; it is stored as CAREGIVER with its id")
    func caregiverRecords() throws {
        let fixture = try Self.fixture()
        let result = Self.record(try caregiverToken(fixture.caregiver), Self.body(fixture, patient: fixture.patient))
        #expect(result.status == 200)
        let stored = try #require(
            try TestDatabase.with {
                try $0.query(
                    "SELECT recorded_by_role, recorded_by_id FROM dose_records WHERE patient_id = \(fixture.patient)"
                ).single
            })
        #expect(try stored.decode((String, UUID).self) == ("CAREGIVER", fixture.caregiver))
    }

    @Test("the access matrix: unlinked or revoked caregivers and other patients get 404, no auth 401")
    func accessMatrix() throws {
        let fixture = try Self.fixture()
        let (otherPatientToken, revokedCaregiver) = try TestDatabase.with { connection in
            let other = try Seed.patient(connection)
            let revoked = UUID()
            try Seed.link(connection, caregiver: revoked, patient: fixture.patient, revoked: true)
            return (try Seed.session(connection, patient: other), revoked)
        }
        #expect(Self.record(try caregiverToken(UUID()), Self.body(fixture, patient: fixture.patient)).status == 404)
        #expect(
            Self.record(try caregiverToken(revokedCaregiver), Self.body(fixture, patient: fixture.patient)).status
                == 404)
        #expect(Self.record(otherPatientToken, Self.body(fixture, patient: fixture.patient)).status == 404)
        // Its own patient has no such medication.
        #expect(Self.record(otherPatientToken, Self.body(fixture)).status == 404)
        let anonymous = invoke(DoseRecord(), event: makeEvent(bearer: nil, body: json(Self.body(fixture))))
        #expect(anonymous.status == 401)
        #expect(Self.record(fixture.patientToken, Self.body(fixture, patient: fixture.patient)).status == 200)
        #expect(
            try TestDatabase.with { try $0.query("SELECT 1 FROM dose_records WHERE patient_id = \(fixture.patient)") }
                .count == 1)
    }

    @Test("a caregiver must name the patient")
    func caregiverNeedsPatientID() throws {
        let fixture = try Self.fixture()
        let result = Self.record(try caregiverToken(fixture.caregiver), Self.body(fixture))
        #expect(result.status == 422)
        #expect(fieldErrors(result) == ["patientId": "patientId is required"])
    }

    @Test("another patient's medication is 404; a PRN medication is 422")
    func medicationChecks() throws {
        let fixture = try Self.fixture()
        let (foreign, prn) = try TestDatabase.with { connection in
            (
                try Seed.medication(connection, patient: try Seed.patient(connection), times: ["08:00"]),
                try Seed.medication(connection, patient: fixture.patient, isPRN: true, times: ["08:00"])
            )
        }
        var body = Self.body(fixture)
        body["medicationId"] = .string(foreign.uuidString)
        #expect(Self.record(fixture.patientToken, body).status == 404)
        body["medicationId"] = .string(prn.uuidString)
        let result = Self.record(fixture.patientToken, body)
        #expect(result.status == 422 && fieldErrors(result).keys.sorted() == ["medicationId"])
    }

    @Test("scheduledAt must be a schedule time on a date the medication is active, not after today in Tokyo")
    func scheduleChecks() throws {
        let fixture = try Self.fixture()
        #expect(
            fieldErrors(Self.record(fixture.patientToken, Self.body(fixture, time: "08:01"))) == [
                "scheduledAt": "scheduledAt is not a scheduled time of this medication"
            ])
        var tomorrow = Self.body(fixture)
        tomorrow["scheduledAt"] = .string(TokyoDay.instant(TokyoDay.offset(2), "08:00"))
        #expect(
            fieldErrors(Self.record(fixture.patientToken, tomorrow)) == [
                "scheduledAt": "scheduledAt may not be on a date after today (Asia/Tokyo)"
            ])
        let (late, archived) = try TestDatabase.with { connection in
            (
                try Seed.medication(connection, patient: fixture.patient, times: ["08:00"], start: TokyoDay.offset(0)),
                try Seed.medication(connection, patient: fixture.patient, times: ["08:00"], archived: true)
            )
        }
        for medication in [late, archived] {
            var body = Self.body(fixture)
            body["medicationId"] = .string(medication.uuidString)
            #expect(
                fieldErrors(Self.record(fixture.patientToken, body)) == [
                    "scheduledAt": "the medication is not active on the date of scheduledAt"
                ])
        }
        #expect(
            try TestDatabase.with { try $0.query("SELECT 1 FROM dose_records WHERE patient_id = \(fixture.patient)") }
                .isEmpty)
    }

    @Test("field validation: the app's ids, RFC 3339 with an offset, takenAt at most 5 minutes ahead")
    func fieldValidation() throws {
        let fixture = try Self.fixture()
        let token = fixture.patientToken
        #expect(
            fieldErrors(Self.record(token, [:])) == [
                "medicationId": "medicationId is required", "scheduledAt": "scheduledAt is required",
            ])
        var body = Self.body(fixture)
        body["medicationId"] = .string("not an id")
        body["scheduledAt"] = .string("\(fixture.date)T08:00:00")
        #expect(fieldErrors(Self.record(token, body)).keys.sorted() == ["medicationId", "scheduledAt"])
        // An id the app's uuid column cannot hold names no medication: 404, nothing recorded.
        body = Self.body(fixture)
        body["medicationId"] = .string("patient-123")
        #expect(Self.record(token, body).status == 404)
        let future = Timestamp.rfc3339UTC(Date().addingTimeInterval(6 * 60))
        #expect(
            fieldErrors(Self.record(token, Self.body(fixture, takenAt: future))) == [
                "takenAt": "takenAt may not be more than 5 minutes in the future"
            ])
        let soon = Timestamp.rfc3339UTC(Date().addingTimeInterval(4 * 60))
        #expect(Self.record(token, Self.body(fixture, takenAt: soon)).status == 200)
    }

    @Test(
        "takenAt outside its plausible window, or before 1970, is a 422 naming takenAt — never a 500",
        arguments: [
            ("0000-01-01T00:00:00Z", "takenAt must lie between 1970-01-01T00:00:00Z and 2999-12-31T23:59:59Z"),
            ("0001-01-01T00:00:00+09:00", "takenAt must lie between 1970-01-01T00:00:00Z and 2999-12-31T23:59:59Z"),
            ("1900-01-01T00:00:00Z", "takenAt must lie between 1970-01-01T00:00:00Z and 2999-12-31T23:59:59Z"),
            ("9999-12-31T23:59:59-23:59", "takenAt must lie between 1970-01-01T00:00:00Z and 2999-12-31T23:59:59Z"),
            ("1971-01-01T00:00:00Z", "takenAt may not be more than 24 hours before scheduledAt"),
        ])
    func implausibleTakenAt(takenAt: String, message: String) throws {
        let fixture = try Self.fixture()
        let result = Self.record(fixture.patientToken, Self.body(fixture, takenAt: takenAt))
        #expect(result.status == 422)
        #expect(fieldErrors(result) == ["takenAt": message])
        #expect(try Self.recordCount(fixture) == 0)
    }

    @Test("takenAt may lie up to 24 hours before scheduledAt, not more; scheduledAt in year 0000 is a 422 too")
    func takenAtAroundScheduledAt() throws {
        let fixture = try Self.fixture()
        let scheduled = try #require(Timestamp.parseRFC3339(TokyoDay.instant(fixture.date, "20:00")))
        let tooEarly = Timestamp.rfc3339UTC(scheduled.addingTimeInterval(-24 * 3600 - 1))
        #expect(
            fieldErrors(Self.record(fixture.patientToken, Self.body(fixture, time: "20:00", takenAt: tooEarly)))
                == ["takenAt": "takenAt may not be more than 24 hours before scheduledAt"])
        let early = Timestamp.rfc3339UTC(scheduled.addingTimeInterval(-23 * 3600))
        let accepted = Self.record(fixture.patientToken, Self.body(fixture, time: "20:00", takenAt: early))
        #expect(accepted.status == 200 && accepted.json?["record"]?["withinTime"] == .bool(true))
        var body = Self.body(fixture)
        body["scheduledAt"] = .string("0000-01-01T08:00:00+09:00")
        #expect(
            fieldErrors(Self.record(fixture.patientToken, body)) == [
                "scheduledAt": "scheduledAt must lie between 1970-01-01T00:00:00Z and 2999-12-31T23:59:59Z"
            ])
    }

    @Test(
        "the recording call refuses exactly what the checks refuse: every medication kind, around Tokyo midnight",
        arguments: [
            // 23:59:59 on 2026-03-05 in Tokyo, then its midnight: 2026-03-06 becomes today.
            "2026-03-05T14:59:59Z", "2026-03-05T15:00:00Z",
        ])
    func callAgreesWithTheChecks(nowText: String) throws {
        let now = try #require(Timestamp.parseRFC3339(nowText))
        let today = TokyoClock.dateString(of: now)
        let (patient, token, medications) = try TestDatabase.with { connection in
            let patient = try Seed.patient(connection)
            let medications: [(id: UUID, allows: (String, String) -> Bool)] = [
                (
                    try Seed.medication(
                        connection, patient: patient, times: ["08:00", "23:30"], start: "2026-03-01", end: "2026-03-10"),
                    { date, time in
                        date >= "2026-03-01" && date <= "2026-03-10" && ["08:00:00", "23:30:00"].contains(time)
                    }
                ),
                (
                    try Seed.medication(connection, patient: patient, times: ["08:00"], start: "2026-03-06"),
                    { date, time in date >= "2026-03-06" && time == "08:00:00" }
                ),
                (try Seed.medication(connection, patient: patient, isPRN: true, times: ["08:00"]), { _, _ in false }),
                (
                    try Seed.medication(connection, patient: patient, times: ["08:00"], archived: true),
                    { _, _ in false }
                ),
            ]
            return (patient, try Seed.session(connection, patient: patient), medications)
        }
        let dates = ["2026-02-28", "2026-03-01", "2026-03-05", "2026-03-06", "2026-03-07", "2026-03-10", "2026-03-11"]
        for medication in medications {
            for date in dates {
                for time in ["08:00:00", "08:01:00", "08:00:30", "23:30:00"] {
                    let scheduledAt = "\(date)T\(time)+09:00"
                    let allowed = medication.allows(date, time) && date <= today && time.hasSuffix(":00")
                    // The call alone, as the endpoint sends it (no push: no environment), rolled back.
                    let outcome = try TestDatabase.with { connection in
                        try connection.query("BEGIN")
                        defer { _ = try? connection.query("ROLLBACK") }
                        // The scheduled instant falls on a whole minute, its Tokyo minute a time of day.
                        let onMinute = time.hasSuffix(":00")
                        return try connection.query(
                            """
                            SELECT outcome FROM caregiver_push.record_dose(
                                NULL, \(patient)::text, \(medication.id)::text, \(scheduledAt)::text, \(nowText)::text,
                                \(String(time.prefix(5)) + ":00")::time, \(date)::date, \(today)::date, \(onMinute),
                                gen_random_uuid()::text, 'PATIENT', \(patient)::text, 'probe', 'morning', true, now(),
                                'PATIENT', NULL, NULL, 30, 10, NULL, 0)
                            """
                        )[0].decode(String.self, at: 0)
                    }
                    let body: [String: JSONValue] = [
                        "medicationId": .string(medication.id.uuidString), "scheduledAt": .string(scheduledAt),
                        "takenAt": .string(nowText),
                    ]
                    let result = invoke(
                        DoseRecord(), event: makeEvent(path: "/api/dose-records", bearer: token, body: json(body)),
                        now: now)
                    let asked = "\(medication.id) \(scheduledAt) at \(nowText)"
                    #expect(["recorded", "unchanged"].contains(outcome) == allowed, "\(asked): \(outcome)")
                    #expect(result.status == (allowed ? 200 : 422), "\(asked)")
                }
            }
        }
    }

    static func recordCount(_ fixture: Fixture) throws -> Int {
        try TestDatabase.with { connection in
            try connection.query("SELECT count(*) FROM dose_records WHERE patient_id = \(fixture.patient)")[0]
                .decode(Int.self, at: 0)
        }
    }
}

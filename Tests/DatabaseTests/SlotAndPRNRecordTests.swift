import Codecs
import CaregiverPush
import Foundation
import Synchronization
import Testing
import TestFixtures
import TestSupport

/// slot-bulk-record and prn-record in-process against the real database (docs/behaviour.md#slot-bulk-record,
/// docs/behaviour.md#prn-record).
@Suite("slot-bulk-record and prn-record")
struct SlotAndPRNRecordTests {
    struct Household {
        let patient: UUID
        let token: String
        let morning: [UUID]
    }

    /// Three morning medications, one at noon, one bedtime pair (22:00 and 02:00), one PRN, one archived.
    static func household() throws -> Household {
        try TestDatabase.with { connection in
            let patient = try Seed.patient(connection)
            let morning = try (0..<3).map { index in
                try Seed.medication(connection, patient: patient, times: ["0\(7 + index):00", "21:00"])
            }
            try Seed.medication(connection, patient: patient, times: ["12:00"])
            try Seed.medication(connection, patient: patient, times: ["22:00", "02:00"])
            try Seed.medication(connection, patient: patient, isPRN: true, times: ["08:00"])
            try Seed.medication(connection, patient: patient, times: ["08:00"], archived: true)
            return Household(patient: patient, token: try Seed.session(connection, patient: patient), morning: morning)
        }
    }

    static func slot(_ bearer: String, _ body: [String: JSONValue]) -> Invocation {
        invoke(SlotBulkRecord(), event: makeEvent(path: "/api/dose-records/slot", bearer: bearer, body: json(body)))
    }

    static func count(_ patient: UUID) throws -> Int {
        try TestDatabase.with {
            try $0.query("SELECT count(*) FROM dose_records WHERE patient_id = \(patient)")[0].decode(Int.self, at: 0)
        }
    }

    @Test("a slot records every active scheduled medication in it, under one recordingGroupId")
    func bulkRecords() throws {
        let household = try Self.household()
        let date = TokyoDay.offset(-1)
        let result = Self.slot(household.token, ["date": .string(date), "slot": .string("morning")])
        #expect(result.status == 200)
        #expect(result.json?["updatedCount"] == .number(3))
        let group = try #require(result.json?["recordingGroupId"]?.stringValue)
        let records = result.json?["records"]?.arrayValue ?? []
        #expect(
            Set(records.compactMap { $0["medicationId"]?.stringValue })
                == Set(household.morning.map { $0.uuidString.lowercased() }))
        #expect(
            records.allSatisfy {
                $0["recordingGroupId"] == .string(group) && $0["slot"] == .string("morning")
                    && $0["date"] == .string(date)
            })
        let groups = try TestDatabase.with {
            try $0.query("SELECT DISTINCT recording_group_id FROM dose_records WHERE patient_id = \(household.patient)")
        }
        let storedGroup = try #require(groups.single).decode(UUID.self, at: 0)
        #expect(groups.count == 1 && storedGroup.uuidString.lowercased() == group)
    }

    @Test("a slot's push is within time only if every dose it records is; a dose recorded before does not count")
    func slotWithinTime() throws {
        let date = TokyoDay.offset(-1)
        // Taken at 08:30: the 07:00 dose is 90 minutes late, the 08:00 and 09:00 doses are within their hour.
        let body: [String: JSONValue] = [
            "date": .string(date), "slot": .string("morning"), "takenAt": .string(TokyoDay.instant(date, "08:30")),
        ]
        func groupEvent(_ result: Invocation) throws -> Bool? {
            let group = try #require(result.json?["recordingGroupId"]?.stringValue)
            return try TestDatabase.with {
                try $0.query("SELECT within_time FROM push_events WHERE event_key = \("doseTaken:\(group)")").single?
                    .decode(Bool.self, at: 0)
            }
        }
        let all = try Self.household()
        let late = Self.slot(all.token, body)
        #expect(late.json?["updatedCount"] == .number(3))
        let within = late.json?["records"]?.arrayValue?.compactMap { $0["withinTime"]?.boolValue } ?? []
        #expect(within.count == 3 && within.filter { $0 }.count == 2)
        #expect(try groupEvent(late) == false)
        // The 07:00 dose recorded on its own first: the slot records the two on time, and its push says so.
        let rest = try Self.household()
        let single = DoseRecordTests.record(
            rest.token,
            [
                "medicationId": .string(rest.morning[0].uuidString),
                "scheduledAt": .string(TokyoDay.instant(date, "07:00")),
                "takenAt": .string(TokyoDay.instant(date, "08:30")),
            ])
        #expect(single.status == 200)
        let onTime = Self.slot(rest.token, body)
        #expect(onTime.json?["updatedCount"] == .number(2))
        #expect(try groupEvent(onTime) == true)
    }

    @Test("a repeated slot records nothing: recordingGroupId null, updatedCount 0")
    func repeatRecordsNothing() throws {
        let household = try Self.household()
        let body: [String: JSONValue] = ["date": .string(TokyoDay.offset(-1)), "slot": .string("morning")]
        _ = Self.slot(household.token, body)
        let again = Self.slot(household.token, body)
        #expect(again.status == 200)
        #expect(again.json == .object(["recordingGroupId": .null, "updatedCount": .number(0), "records": .array([])]))
        #expect(try Self.count(household.patient) == 3)
    }

    @Test("doses already recorded one by one are skipped; the rest are recorded")
    func partialSlot() throws {
        let household = try Self.household()
        let date = TokyoDay.offset(-1)
        let single = invoke(
            DoseRecord(),
            event: makeEvent(
                bearer: household.token,
                body: json([
                    "medicationId": .string(household.morning[0].uuidString),
                    "scheduledAt": .string(TokyoDay.instant(date, "07:00")),
                ])))
        #expect(single.status == 200)
        let result = Self.slot(household.token, ["date": .string(date), "slot": .string("morning")])
        #expect(result.json?["updatedCount"] == .number(2))
    }

    @Test("bedtime covers 20:00–03:59 of the date; noon only its own times")
    func slotBoundaries() throws {
        let household = try Self.household()
        let date = TokyoDay.offset(-1)
        let bedtime = Self.slot(household.token, ["date": .string(date), "slot": .string("bedtime")])
        // 21:00 of the three morning medications, and 22:00 and 02:00 of the bedtime one.
        #expect(bedtime.json?["updatedCount"] == .number(5))
        let noon = Self.slot(household.token, ["date": .string(date), "slot": .string("noon")])
        #expect(noon.json?["updatedCount"] == .number(1))
        #expect(
            Self.slot(household.token, ["date": .string(date), "slot": .string("evening")]).json?["updatedCount"]
                == .number(0))
    }

    @Test("20 identical slot requests at once record each dose once, all in one group")
    func concurrentSlots() throws {
        let household = try Self.household()
        let body = json(["date": .string(TokyoDay.offset(-1)), "slot": .string("morning")])
        let total = Mutex(0)
        let token = household.token
        DispatchQueue.concurrentPerform(iterations: 20) { _ in
            let result = invoke(SlotBulkRecord(), event: makeEvent(bearer: token, body: body))
            total.withLock { $0 += Int(result.json?["updatedCount"]?.integerValue ?? -100) }
        }
        #expect(total.withLock { $0 } == 3)
        #expect(try Self.count(household.patient) == 3)
        let groups = try TestDatabase.with {
            try $0.query("SELECT DISTINCT recording_group_id FROM dose_records WHERE patient_id = \(household.patient)")
        }
        #expect(groups.count == 1)
    }

    @Test(
        "slot validation: a real date, a known slot, not after today",
        arguments: [
            (
                ["date": "2026-02-30", "slot": "morning"],
                ["date": "date must be a date (YYYY-MM-DD) from 1970-01-01 on"]
            ),
            (["date": "2026-2-3", "slot": "morning"], ["date": "date must be a date (YYYY-MM-DD) from 1970-01-01 on"]),
            (
                ["date": "0000-01-01", "slot": "morning"],
                ["date": "date must be a date (YYYY-MM-DD) from 1970-01-01 on"]
            ),
            (
                ["date": TokyoDay.offset(-1), "slot": "morning", "takenAt": "1900-01-01T00:00:00Z"],
                ["takenAt": "takenAt must lie between 1970-01-01T00:00:00Z and 2999-12-31T23:59:59Z"]
            ),
            (["date": "2026-02-11", "slot": "lunch"], ["slot": "slot must be morning, noon, evening or bedtime"]),
            ([:], ["date": "date is required", "slot": "slot must be morning, noon, evening or bedtime"]),
        ] as [([String: String], [String: String])])
    func slotValidation(body: [String: String], expected: [String: String]) throws {
        let household = try Self.household()
        let result = Self.slot(household.token, body.mapValues { .string($0) })
        #expect(result.status == 422)
        #expect(fieldErrors(result) == expected)
    }

    @Test("a slot on a future Tokyo date is refused")
    func futureSlot() throws {
        let household = try Self.household()
        let result = Self.slot(household.token, ["date": .string(TokyoDay.offset(2)), "slot": .string("morning")])
        #expect(fieldErrors(result) == ["date": "date may not be after today (Asia/Tokyo)"])
    }

    // MARK: prn-record

    static func prnHousehold() throws -> (patient: UUID, token: String, prn: UUID, scheduled: UUID) {
        try TestDatabase.with { connection in
            let patient = try Seed.patient(connection)
            return (
                patient, try Seed.session(connection, patient: patient),
                try Seed.medication(connection, patient: patient, isPRN: true),
                try Seed.medication(connection, patient: patient, times: ["08:00"])
            )
        }
    }

    static func prn(_ bearer: String, _ body: [String: JSONValue], key: String? = nil) -> Invocation {
        invoke(
            PrnRecord(),
            event: makeEvent(
                path: "/api/prn-dose-records", bearer: bearer, body: json(body),
                extraHeaders: key.map { ["idempotency-key": $0] } ?? [:]))
    }

    @Test(
        "the PRN call refuses exactly what the checks refuse: every medication kind, either side of Tokyo midnight",
        arguments: ["2026-03-05T14:59:59Z", "2026-03-05T15:00:00Z"])
    func prnCallAgreesWithTheChecks(takenText: String) throws {
        let takenAt = try #require(Timestamp.parseRFC3339(takenText))
        let date = TokyoClock.dateString(of: takenAt)
        let (patient, token, medications) = try TestDatabase.with { connection in
            let patient = try Seed.patient(connection)
            // Each with whether it may be recorded on a Tokyo date (as-needed, unarchived, started and not ended).
            let medications: [(id: UUID, allows: (String) -> Bool)] = [
                (
                    try Seed.medication(
                        connection, patient: patient, isPRN: true, start: "2026-03-01", end: "2026-03-05"),
                    { $0 >= "2026-03-01" && $0 <= "2026-03-05" }
                ),
                (
                    try Seed.medication(connection, patient: patient, isPRN: true, start: "2026-03-06"),
                    { $0 >= "2026-03-06" }
                ),
                (try Seed.medication(connection, patient: patient, times: ["08:00"]), { _ in false }),
                (try Seed.medication(connection, patient: patient, isPRN: true, archived: true), { _ in false }),
            ]
            return (patient, try Seed.session(connection, patient: patient), medications)
        }
        for medication in medications {
            let allowed = medication.allows(date)
            // The call alone (no push: no environment), rolled back.
            let outcome = try TestDatabase.with { connection in
                try connection.query("BEGIN")
                defer { _ = try? connection.query("ROLLBACK") }
                return try connection.query(
                    """
                    SELECT outcome FROM caregiver_push.record_prn(
                        NULL, \(patient)::text, 0, NULL, gen_random_uuid()::text, gen_random_uuid()::text,
                        \(medication.id)::text, \(date)::date, \(takenText)::text, 1, gen_random_uuid()::text, 'f',
                        gen_random_uuid()::text, 'PATIENT', \(patient)::text, 'probe', 'bedtime', now(), 'PATIENT', NULL,
                        NULL, 30, 10, NULL, 0)
                    """
                )[0].decode(String.self, at: 0)
            }
            let result = Self.prn(
                token, ["medicationId": .string(medication.id.uuidString), "takenAt": .string(takenText)],
                at: takenAt.addingTimeInterval(60))
            #expect((outcome == "recorded") == allowed, "\(medication.id) at \(takenText): \(outcome)")
            #expect(result.status == (allowed ? 200 : 422), "\(medication.id) at \(takenText)")
        }
    }

    @Test("each keyed PRN call records a dose; quantity defaults to 1")
    func prnRecordsEachCall() throws {
        let household = try Self.prnHousehold()
        let body: [String: JSONValue] = ["medicationId": .string(household.prn.uuidString)]
        let first = Self.prn(household.token, body, key: UUID().uuidString)
        let second = Self.prn(household.token, body, key: UUID().uuidString)
        #expect(first.status == 200 && second.status == 200)
        #expect(first.json?["updatedCount"] == .number(1) && first.json?["record"]?["quantity"] == .number(1))
        #expect(first.json?["record"]?["id"] != second.json?["record"]?["id"])
        #expect(try Self.prnCount(household.patient) == 2)
    }

    static func prnCount(_ patient: UUID) throws -> Int {
        try TestDatabase.with {
            try $0.query("SELECT count(*) FROM prn_dose_records WHERE patient_id = \(patient)")[0].decode(
                Int.self, at: 0)
        }
    }

    /// A keyless PRN at a chosen instant, as a host hands the invocation its clock.
    static func prn(_ bearer: String, _ body: [String: JSONValue], at now: Date) -> Invocation {
        invoke(
            PrnRecord(), event: makeEvent(path: "/api/prn-dose-records", bearer: bearer, body: json(body)), now: now)
    }

    @Test("without a key, the same body within the retry window is one record; after it, or another body, a new one")
    func keylessRetryWindow() throws {
        let household = try Self.prnHousehold()
        let body: [String: JSONValue] = ["medicationId": .string(household.prn.uuidString)]
        // A window starts at a multiple of 60 s: 0.5 s before one ends, and 59 s later (the next window).
        let window = Double(PrnRecord.retryWindowSeconds)
        let start = (Date().timeIntervalSince1970 / window).rounded(.down) * window - 0.5
        let first = Self.prn(household.token, body, at: Date(timeIntervalSince1970: start))
        let retry = Self.prn(household.token, body, at: Date(timeIntervalSince1970: start + window - 1))
        #expect(first.json?["updatedCount"] == .number(1) && retry.json?["updatedCount"] == .number(0))
        #expect(first.json?["record"]?["id"] == retry.json?["record"]?["id"])
        // Another quantity is another dose; so is the same body two windows on.
        let other = Self.prn(
            household.token, body.merging(["quantity": .number(2)]) { $1 }, at: Date(timeIntervalSince1970: start + 1))
        let later = Self.prn(household.token, body, at: Date(timeIntervalSince1970: start + 2 * window + 1))
        #expect(other.json?["updatedCount"] == .number(1) && later.json?["updatedCount"] == .number(1))
        #expect(Set([first, other, later].compactMap { $0.json?["record"]?["id"]?.stringValue }).count == 3)
        #expect(try Self.prnCount(household.patient) == 3)
        // Another patient's identical body is theirs alone.
        let neighbour = try Self.prnHousehold()
        let theirs = Self.prn(
            neighbour.token, ["medicationId": .string(neighbour.prn.uuidString)], at: Date(timeIntervalSince1970: start)
        )
        #expect(theirs.json?["updatedCount"] == .number(1))
    }

    @Test("a keyless PRN waits for another keyless one with the same body to commit, so it finds that record")
    func keylessRetryTakesTheLock() throws {
        let household = try Self.prnHousehold()
        let fingerprint = PrnRecord.fingerprint(medicationID: AppID(household.prn), quantity: nil, takenAt: nil)
        let key = PrnRecord.retryLockKey(AppID(household.patient), fingerprint)
        let holder = try TestDatabase.connect()
        defer { holder.close() }
        try holder.query("BEGIN")
        try holder.query("SELECT pg_advisory_xact_lock(\(PrnRecord.retryLockNamespace), hashtext(\(key)))")
        // The request on a thread of its own (it blocks in libpq): never starved of a thread by the test's waiting.
        let (token, prn) = (household.token, household.prn)
        let status = Mutex<Int?>(nil)
        let finished = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let answer = Self.prn(token, ["medicationId": .string(prn.uuidString)], at: Date()).status
            status.withLock { $0 = answer }
            finished.signal()
        }
        // Until the request waits for this very lock (as PostgreSQL shows it), nothing is recorded.
        let waiting = try TestDatabase.with { connection in
            for _ in 0..<1000 {
                let count = try connection.query(
                    """
                    SELECT count(*) FROM pg_locks
                    WHERE locktype = 'advisory' AND NOT granted AND classid = \(PrnRecord.retryLockNamespace)
                    """)[0].decode(Int.self, at: 0)
                if count == 1 { return true }
                Thread.sleep(forTimeInterval: 0.01)
            }
            return false
        }
        #expect(waiting, "the keyless request never waited for the (patient, body) lock")
        #expect(try Self.prnCount(household.patient) == 0)
        try holder.query("COMMIT")
        #expect(finished.wait(timeout: .now() + 30) == .success)
        #expect(status.withLock { $0 } == 200)
        #expect(try Self.prnCount(household.patient) == 1)
    }

    @Test("eight keyless copies of one PRN at once, either side of a window's end, record one dose")
    func keylessConcurrentRetries() async throws {
        let household = try Self.prnHousehold()
        let body: [String: JSONValue] = ["medicationId": .string(household.prn.uuidString)]
        // Half the copies arrive just before a retry window ends, half just after: two windows' keys, which only the
        // lock on (patient, body) keeps from recording twice.
        let window = Double(PrnRecord.retryWindowSeconds)
        let boundary = (Date().timeIntervalSince1970 / window).rounded(.down) * window
        let token = household.token
        let answers: [Int] = await withTaskGroup(of: Int.self) { group in
            for copy in 0..<8 {
                group.addTask {
                    let now = Date(timeIntervalSince1970: boundary + (copy % 2 == 0 ? -0.3 : 0.3))
                    let answer = Self.prn(token, body, at: now).json?["updatedCount"]?.integerValue
                    return answer.map { Int($0) } ?? -1
                }
            }
            var answers: [Int] = []
            for await answer in group { answers.append(answer) }
            return answers
        }
        #expect(answers.sorted() == [0, 0, 0, 0, 0, 0, 0, 1])
        #expect(try Self.prnCount(household.patient) == 1)
    }

    @Test("an Idempotency-Key repeat returns the first record with updatedCount 0; another payload with it is 422")
    func idempotencyKey() throws {
        let household = try Self.prnHousehold()
        let key = UUID().uuidString
        let body: [String: JSONValue] = ["medicationId": .string(household.prn.uuidString), "quantity": .number(2)]
        let first = Self.prn(household.token, body, key: key)
        let repeated = Self.prn(household.token, body, key: key)
        #expect(first.json?["updatedCount"] == .number(1))
        #expect(repeated.status == 200 && repeated.json?["updatedCount"] == .number(0))
        #expect(repeated.json?["record"] == first.json?["record"])
        var different = body
        different["quantity"] = .number(3)
        let conflict = Self.prn(household.token, different, key: key)
        #expect(conflict.status == 422 && conflict.json?["type"] == .string("/problems/unprocessable"))
        var withTime = body
        withTime["takenAt"] = first.json?["record"]?["takenAt"]
        #expect(Self.prn(household.token, withTime, key: key).status == 422)
        let count = try TestDatabase.with {
            try $0.query("SELECT count(*) FROM prn_dose_records WHERE patient_id = \(household.patient)")[0].decode(
                Int.self, at: 0)
        }
        #expect(count == 1)
    }

    @Test("a key is scoped to its patient: another patient may use the same key")
    func keyScopedToPatient() throws {
        let first = try Self.prnHousehold()
        let second = try Self.prnHousehold()
        let key = UUID().uuidString
        #expect(
            Self.prn(first.token, ["medicationId": .string(first.prn.uuidString)], key: key).json?["updatedCount"]
                == .number(1))
        #expect(
            Self.prn(second.token, ["medicationId": .string(second.prn.uuidString)], key: key).json?["updatedCount"]
                == .number(1))
    }

    @Test("an unlinked or revoked caregiver gets 404 from slot-bulk-record and prn-record and records nothing")
    func caregiverAccess() throws {
        let household = try Self.household()
        let prn = try Self.prnHousehold()
        let (linked, revoked) = try TestDatabase.with { connection in
            let (linked, revoked) = (UUID(), UUID())
            for patient in [household.patient, prn.patient] {
                try Seed.link(connection, caregiver: linked, patient: patient)
                try Seed.link(connection, caregiver: revoked, patient: patient, revoked: true)
            }
            return (linked, revoked)
        }
        let slotBody: [String: JSONValue] = [
            "patientId": .string(household.patient.uuidString), "date": .string(TokyoDay.offset(-1)),
            "slot": .string("morning"),
        ]
        let prnBody: [String: JSONValue] = [
            "patientId": .string(prn.patient.uuidString), "medicationId": .string(prn.prn.uuidString),
        ]
        for caregiver in [UUID(), revoked] {
            let token = try caregiverToken(caregiver)
            #expect(Self.slot(token, slotBody).status == 404)
            #expect(Self.prn(token, prnBody).status == 404)
            #expect(Self.prn(token, prnBody, key: UUID().uuidString).status == 404)
        }
        #expect(try Self.count(household.patient) == 0)
        let prnCount = try TestDatabase.with {
            try $0.query("SELECT count(*) FROM prn_dose_records WHERE patient_id = \(prn.patient)")[0].decode(
                Int.self, at: 0)
        }
        #expect(prnCount == 0)
        let token = try caregiverToken(linked)
        #expect(Self.slot(token, slotBody).json?["updatedCount"] == .number(3))
        #expect(Self.prn(token, prnBody).json?["updatedCount"] == .number(1))
    }

    @Test("PRN validation: scheduled medication, quantity 1–10, Idempotency-Key a UUID")
    func prnValidation() throws {
        let household = try Self.prnHousehold()
        let scheduled = Self.prn(household.token, ["medicationId": .string(household.scheduled.uuidString)])
        #expect(fieldErrors(scheduled) == ["medicationId": "medicationId must be an as-needed (PRN) medication"])
        for quantity: JSONValue in [.number(0), .number(11), .number(2.5), .string("2")] {
            let result = Self.prn(
                household.token, ["medicationId": .string(household.prn.uuidString), "quantity": quantity])
            #expect(fieldErrors(result) == ["quantity": "quantity must be an integer from 1 to 10"])
        }
        let badKey = Self.prn(household.token, ["medicationId": .string(household.prn.uuidString)], key: "not-a-uuid")
        #expect(fieldErrors(badKey) == ["Idempotency-Key": "Idempotency-Key must be a UUID"])
        let count = try TestDatabase.with {
            try $0.query("SELECT count(*) FROM prn_dose_records WHERE patient_id = \(household.patient)")[0].decode(
                Int.self, at: 0)
        }
        #expect(count == 0)
    }
}

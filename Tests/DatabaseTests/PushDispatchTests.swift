@testable import Codecs
@testable import Libpq
@testable import Curl
@testable import OpenSSLCrypto
@testable import CaregiverPush
import Foundation
import Synchronization
import Testing
import TestFixtures
import TestSupport

/// The push path (docs/behaviour.md#push) against a real database and the FCM emulator: who is sent what, retries,
/// the shared access token, and what never leaves the process.
@Suite("push dispatch")
struct PushDispatchTests {
    /// A patient with linked caregivers and their devices, created through the real registration code.
    struct Household {
        let patient: UUID
        let displayName: String
        var devices: [UUID: [String]] = [:]

        var allTokens: Set<String> { Set(devices.values.flatMap { $0 }) }
    }

    /// On `database`, or the suite's shared one: a test that sweeps needs a database of its own, since a sweep
    /// leases every due delivery of its database.
    static func with<T>(_ database: IsolatedDatabase?, _ body: (PostgresConnection) throws -> T) throws -> T {
        try database.map { try $0.with(body) } ?? TestDatabase.with(body)
    }

    static func household(
        displayName: String = "佐藤一郎", caregivers: [[String]], in database: IsolatedDatabase? = nil
    ) throws -> Household {
        try Self.with(database) { connection in
            let patient = try Seed.patient(connection, displayName: displayName)
            var household = Household(patient: patient, displayName: displayName)
            for tokens in caregivers {
                let caregiver = UUID()
                try Seed.link(connection, caregiver: caregiver, patient: patient)
                for token in tokens { try Seed.registerDevice(token, caregiver: caregiver, connection: connection) }
                household.devices[caregiver] = tokens
            }
            return household
        }
    }

    static func event(
        _ household: Household, group: UUID? = UUID(), withinTime: Bool = false, actor: UUID? = nil,
        takenAt: Date = Date(timeIntervalSince1970: 1_770_764_700)
    ) -> DoseTakenEvent {
        DoseTakenEvent(
            patientID: AppID(household.patient), date: TokyoClock.dateString(of: takenAt), slot: Slot(instant: takenAt),
            recordingGroupID: group.map(AppID.init), takenAt: takenAt, withinTime: withinTime, actingCaregiverID: actor)
    }

    /// One recording's push as a cold function process runs it, with its own database session and push resources:
    /// the outbox written in a transaction (as the recording's own), then the post-response send of that event.
    @discardableResult
    static func dispatch(
        _ event: DoseTakenEvent, fake: FCMFake, log: CapturedLog = CapturedLog(), overrides: [String: String?] = [:]
    ) -> DeliveryReport {
        dispatch(event, configuration: fake.configuration(overrides), log: log)
    }

    @discardableResult
    static func dispatch(
        _ event: DoseTakenEvent, configuration: Configuration, log: CapturedLog = CapturedLog()
    ) -> DeliveryReport {
        let database = DatabaseSession(configuration: configuration)
        defer { database.close() }
        let logger = log.logger(function: "dose-record")
        var lease: OwedPush.Lease?
        do {
            // The recording's own statement, leasing what it queues to the recording's sender.
            let token = UUID()
            let leased = try database.withTransaction { connection in
                try PushOutbox.enqueueQuery(
                    event, source: .doseRecord, configuration: configuration, ifRecorded: nil, lease: token,
                    logger: logger
                ).map { try connection.query($0) }
            }
            if let leased, !leased.isEmpty { lease = OwedPush.Lease(token: token, rows: leased) }
        } catch {
            Issue.record("the outbox could not be written: \(error)")
        }
        let dispatcher = PushDispatcher(configuration: configuration, logger: logger)
        return dispatcher.dispatch(
            eventKey: event.eventKey, lease: lease, database: database,
            push: PushResources(configuration: configuration),
            deadline: dispatcher.sendDeadline(hostDeadline: nil))
    }

    /// A sweep's sending step for `seconds`, staying (`PUSH_SWEEP_STAY=on`): what falls due meanwhile is sent.
    @discardableResult
    static func sweep(
        for seconds: Double, fake: FCMFake, in isolated: IsolatedDatabase, overrides: [String: String?] = [:]
    ) -> DeliveryReport {
        let configuration = fake.configuration(
            ["PUSH_SWEEP_STAY": "on", "DATABASE_URL": isolated.runtimeURL].merging(overrides) { $1 })
        let database = DatabaseSession(configuration: configuration)
        defer { database.close() }
        let dispatcher = PushDispatcher(
            configuration: configuration, logger: CapturedLog().logger(function: "push-sweep"))
        return dispatcher.sweep(
            until: .now + .milliseconds(Int(seconds * 1000)), database: database,
            push: PushResources(configuration: configuration)
        ).report
    }

    /// The back-off the only delivery of `eventKey` was given, in ms: from its last outcome's recording (`updated_at`,
    /// written by the same statement) to `next_attempt_at`, so that however late the test reads it.
    static func backoffMilliseconds(eventKey: String, in database: IsolatedDatabase) throws -> Int? {
        try database.with { connection in
            try connection.query(
                """
                SELECT (extract(epoch FROM next_attempt_at - updated_at) * 1000)::bigint FROM push_deliveries
                WHERE event_key = \(eventKey)
                """
            ).single?.decode(Int.self, at: 0)
        }
    }

    struct DeliveryRow: Equatable {
        let token: String
        let status: String
        let attempts: Int
        let lastError: String?
        let messageName: String?
    }

    static func deliveries(eventKey: String, in database: IsolatedDatabase? = nil) throws -> [DeliveryRow] {
        try Self.with(database) { connection in
            try connection.query(
                """
                SELECT d.token, p.status, p.attempts, p.last_error, p.fcm_message_name
                FROM push_deliveries p JOIN push_devices d ON d.id = p.push_device_id
                WHERE p.event_key = \(eventKey) ORDER BY d.token
                """
            ).map { row in
                DeliveryRow(
                    token: try row.decode(String.self, at: 0), status: try row.decode(String.self, at: 1),
                    attempts: try row.decode(Int.self, at: 2), lastError: try row.decode(String?.self, at: 3),
                    messageName: try row.decode(String?.self, at: 4))
            }
        }
    }

    @Test("two enabled devices of a linked caregiver get exactly two messages with the exact payload")
    func exactPayload() throws {
        let fake = try FCMFake()
        let tokens = [makeDeviceToken(), makeDeviceToken()]
        let household = try Self.household(displayName: "山田花子", caregivers: [tokens])
        let group = UUID()
        let event = Self.event(household, group: group, takenAt: Date(timeIntervalSince1970: 1_770_764_700))
        let report = Self.dispatch(event, fake: fake)
        #expect(report.leased == 2 && report.sent == 2)
        let received = try fake.messages(to: Set(tokens))
        #expect(received.count == 2)
        #expect(Set(received.compactMap { $0["token"]?.stringValue }) == Set(tokens))
        let patient = household.patient.uuidString.lowercased()
        let eventKey = "doseTaken:\(group.uuidString.lowercased())"
        let collapse = SHA256.hash(Array(eventKey.utf8)).prefix(16).map { String(format: "%02x", $0) }.joined()
        for message in received {
            let token = try #require(message["token"]?.stringValue)
            let expected: JSONValue = .object([
                "token": .string(token),
                "notification": .object(["title": .string("服薬記録"), "body": .string("山田花子さんが薬を服用しました")]),
                "data": .object([
                    "type": .string("DOSE_TAKEN"), "patientId": .string(patient), "date": .string("2026-02-11"),
                    "slot": .string("morning"), "recordingGroupId": .string(group.uuidString.lowercased()),
                    "recordedBy": .string("patient"),
                ]),
                "apns": .object([
                    "headers": .object(["apns-collapse-id": .string(collapse)]),
                    "payload": .object([
                        "aps": .object(["sound": .string("default"), "thread-id": .string("patient-\(patient)")])
                    ]),
                ]),
            ])
            #expect(message["message"] == expected)
        }
        let rows = try Self.deliveries(eventKey: eventKey)
        #expect(
            rows.count == 2
                && rows.allSatisfy {
                    $0.status == "SENT" && $0.attempts == 1
                        && $0.messageName?.hasPrefix("projects/demo-project/messages/") == true
                })
    }

    @Test("within time, the body says so; the display name is in both bodies")
    func withinTimeBody() throws {
        let fake = try FCMFake()
        let token = makeDeviceToken()
        let household = try Self.household(displayName: "田中", caregivers: [[token]])
        Self.dispatch(Self.event(household, withinTime: true), fake: fake)
        #expect(
            try fake.messages(to: [token]).first?["message"]?["notification"]?["body"] == .string("田中さんが時間内に薬を服用しました！"))
    }

    @Test("the same recording group dispatched twice sends nothing the second time")
    func sameGroupTwice() throws {
        let fake = try FCMFake()
        let tokens = [makeDeviceToken(), makeDeviceToken()]
        let household = try Self.household(caregivers: [tokens])
        let event = Self.event(household)
        #expect(Self.dispatch(event, fake: fake).sent == 2)
        let second = Self.dispatch(event, fake: fake)
        #expect(second.leased == 0 && second.sent == 0)
        #expect(try fake.requests().filter { Set(tokens).contains($0["token"]?.stringValue ?? "") }.count == 2)
    }

    @Test("the event key is the group id, or patient, Tokyo date, slot and Tokyo minute without one")
    func eventKeys() throws {
        let household = Household(patient: UUID(), displayName: "x")
        let takenAt = try #require(Timestamp.parseRFC3339("2026-02-11T21:05:59+09:00"))
        let group = UUID()
        #expect(
            Self.event(household, group: group, takenAt: takenAt).eventKey
                == "doseTaken:\(group.uuidString.lowercased())")
        #expect(
            Self.event(household, group: nil, takenAt: takenAt).eventKey
                == "doseTaken:\(household.patient.uuidString.lowercased()):2026-02-11:bedtime:21:05")
        let fake = try FCMFake()
        let token = makeDeviceToken()
        let real = try Self.household(caregivers: [[token]])
        let event = Self.event(real, group: nil, takenAt: takenAt)
        Self.dispatch(event, fake: fake)
        #expect(try Self.deliveries(eventKey: event.eventKey).map(\.token) == [token])
    }

    @Test("no linked caregiver, or no enabled device: nothing is sent and nothing fails")
    func nobodyToTell() throws {
        let fake = try FCMFake()
        let lonely = try Self.household(caregivers: [])
        #expect(Self.dispatch(Self.event(lonely), fake: fake) == DeliveryReport())
        let token = makeDeviceToken()
        let household = try Self.household(caregivers: [[token]])
        try TestDatabase.with { connection in
            try PushDeviceRegistry(connection: connection).unregister(
                token: token, caregiverID: household.devices.keys.first!)
        }
        #expect(Self.dispatch(Self.event(household), fake: fake).leased == 0)
        #expect(try fake.requests().isEmpty)
    }

    @Test("devices of unlinked or revoked caregivers, and of another environment, never receive")
    func recipientsFilter() throws {
        let fake = try FCMFake()
        let linked = makeDeviceToken()
        let household = try Self.household(caregivers: [[linked]])
        let stranger = makeDeviceToken()
        let revoked = makeDeviceToken()
        let production = makeDeviceToken()
        try TestDatabase.with { connection in
            try Seed.registerDevice(stranger, caregiver: UUID(), connection: connection)
            let revokedCaregiver = UUID()
            try Seed.link(connection, caregiver: revokedCaregiver, patient: household.patient, revoked: true)
            try Seed.registerDevice(revoked, caregiver: revokedCaregiver, connection: connection)
            try Seed.registerDevice(
                production, caregiver: household.devices.keys.first!, environment: "PROD", connection: connection)
        }
        let report = Self.dispatch(Self.event(household), fake: fake)
        #expect(report.sent == 1)
        #expect(try fake.requests().compactMap { $0["token"]?.stringValue } == [linked])
    }

    @Test("the caregiver who recorded the dose is not told about it; the others are")
    func actorExcluded() throws {
        let fake = try FCMFake()
        let actorToken = makeDeviceToken()
        let otherTokens = [makeDeviceToken(), makeDeviceToken()]
        let household = try Self.household(caregivers: [[actorToken], otherTokens])
        let actor = try #require(household.devices.first { $0.value == [actorToken] }?.key)
        let report = Self.dispatch(Self.event(household, actor: actor), fake: fake)
        #expect(report.sent == 2)
        #expect(Set(try fake.requests().compactMap { $0["token"]?.stringValue }) == Set(otherTokens))
    }

    @Test("three caregivers with two devices each: six messages, one per device")
    func manyCaregivers() throws {
        let fake = try FCMFake()
        let household = try Self.household(caregivers: (0..<3).map { _ in [makeDeviceToken(), makeDeviceToken()] })
        #expect(Self.dispatch(Self.event(household), fake: fake).sent == 6)
        let tokens = try fake.messages().compactMap { $0["token"]?.stringValue }
        #expect(tokens.count == 6 && Set(tokens) == household.allTokens)
    }

    @Test(
        "dead tokens disable their device; a payload error or the project's APNs error does not",
        arguments: [
            ("UNREGISTERED", "DISABLED_TOKEN", "UNREGISTERED"),
            ("SENDER_ID_MISMATCH", "DISABLED_TOKEN", "SENDER_ID_MISMATCH"),
            ("INVALID_TOKEN", "DISABLED_TOKEN", "INVALID_ARGUMENT"),
            ("INVALID_PAYLOAD", "FAILED", nil),
            ("THIRD_PARTY_AUTH", "FAILED", nil),
        ] as [(String, String, String?)]
    )
    func errorClassification(marker: String, status: String, disabledReason: String?) throws {
        let fake = try FCMFake()
        let token = makeDeviceToken() + marker
        let healthy = makeDeviceToken()
        let household = try Self.household(caregivers: [[token, healthy]])
        let event = Self.event(household)
        Self.dispatch(event, fake: fake)
        let rows = try Self.deliveries(eventKey: event.eventKey)
        #expect(rows.first { $0.token == token }?.status == status)
        #expect(rows.first { $0.token == token }?.attempts == 1)
        #expect(rows.first { $0.token == healthy }?.status == "SENT")
        let device = try TestDatabase.with { try Seed.devices($0, token: token) }.first
        #expect(device?.isEnabled == (disabledReason == nil))
        #expect(device?.disabledReason == disabledReason)
    }

    @Test("503 once: the recording's send makes one attempt and leaves the retry due after its back-off")
    func retryLeftToTheSweep() throws {
        let fake = try FCMFake()
        let database = try IsolatedDatabase()
        let token = makeDeviceToken() + "UNAVAILABLE_ONCE"
        let household = try Self.household(caregivers: [[token]], in: database)
        let event = Self.event(household)
        let report = Self.dispatch(event, fake: fake, overrides: ["DATABASE_URL": database.runtimeURL])
        #expect(report.sent == 0 && report.retryScheduled == 1)
        #expect(try fake.messages(to: [token]).count == 0)
        let row = try #require(try Self.deliveries(eventKey: event.eventKey, in: database).first)
        #expect(row.status == "PENDING" && row.attempts == 1 && row.lastError?.contains("503 UNAVAILABLE") == true)
        // The first back-off: 0.5 s with equal jitter, so due between 0.25 s and 0.5 s after the answer.
        let due = try #require(try Self.backoffMilliseconds(eventKey: event.eventKey, in: database))
        #expect(due >= 250 && due <= 500)
        // A sweep already running sends it when due: one delivered message, SENT after 2 attempts.
        #expect(Self.sweep(for: 4, fake: fake, in: database).sent == 1)
        #expect(try fake.messages(to: [token]).count == 1)
        let sent = try #require(try Self.deliveries(eventKey: event.eventKey, in: database).first)
        #expect(sent.status == "SENT" && sent.attempts == 2)
        let times = try fake.requests().compactMap { $0["receivedAtMs"]?.numberValue }
        try #require(times.count == 2)
        #expect(times[1] - times[0] >= 240)
    }

    @Test("PUSH_FIRST_SEND=sweep: the recording queues, sends nothing; the staying sweep sends, a 503 in a later lease")
    func firstSendBySweep() throws {
        let fake = try FCMFake()
        let database = try IsolatedDatabase()
        let healthy = makeDeviceToken()
        let flaky = makeDeviceToken() + "UNAVAILABLE_ONCE"
        let (bearer, body): (String, [String: JSONValue]) = try database.with { connection in
            let patient = try Seed.patient(connection)
            let caregiver = UUID()
            try Seed.link(connection, caregiver: caregiver, patient: patient)
            for token in [healthy, flaky] {
                try Seed.registerDevice(token, caregiver: caregiver, connection: connection)
            }
            let medication = try Seed.medication(connection, patient: patient, times: ["08:00"])
            return (
                try Seed.session(connection, patient: patient),
                [
                    "medicationId": .string(medication.uuidString),
                    "scheduledAt": .string(TokyoDay.instant(TokyoDay.offset(-1), "08:00")),
                ]
            )
        }
        let settings: [String: String?] = ["PUSH_FIRST_SEND": "sweep", "DATABASE_URL": database.runtimeURL]
        let result = try invokeInProcess(
            DoseRecord(), event: makeEvent(path: "/api/dose-records", bearer: bearer, body: json(body)),
            environment: fake.environment(settings))
        #expect(result.status == 200)
        // The invocation is over and sent nothing: both deliveries wait for the sweep, due now and leased to no one.
        #expect(try fake.requests().isEmpty)
        let queued = try database.with { connection in
            try connection.query(
                """
                SELECT status, attempts, lease_token IS NULL AND next_attempt_at <= now() FROM push_deliveries
                """
            ).map {
                "\(try $0.decode(String.self, at: 0))/\(try $0.decode(Int.self, at: 1))/\(try $0.decode(Bool.self, at: 2))"
            }
        }
        #expect(queued == ["PENDING/0/true", "PENDING/0/true"])
        // A staying sweep that sends first: one attempt per lease, the 503 back to the queue for a later lease. Its
        // retry is due 0.25–0.5 s after the 503; a loaded machine can start the sweep, or reach the retry, after
        // 2.5 s have passed, so further sweeps of 2.5 s follow until the retry was sent (20 s at most).
        var (sent, retries, leases) = (0, 0, 0)
        for _ in 0..<8 where sent < 2 {
            let report = Self.sweep(for: 2.5, fake: fake, in: database, overrides: settings)
            (sent, retries, leases) = (sent + report.sent, retries + report.retryScheduled, leases + report.leases)
        }
        #expect(sent == 2 && retries == 1 && leases >= 2)
        #expect(try fake.messages(to: [healthy]).count == 1)
        #expect(try fake.messages(to: [flaky]).count == 1)
        let rows = try database.with { connection in
            try connection.query("SELECT status, attempts FROM push_deliveries ORDER BY attempts").map {
                "\(try $0.decode(String.self, at: 0))/\(try $0.decode(Int.self, at: 1))"
            }
        }
        #expect(rows == ["SENT/1", "SENT/2"])
        let flakyTimes = try fake.requests().filter { $0["token"]?.stringValue == flaky }.compactMap {
            $0["receivedAtMs"]?.numberValue
        }
        try #require(flakyTimes.count == 2)
        #expect(flakyTimes[1] - flakyTimes[0] >= 240)
    }

    @Test("429 with Retry-After: 1 is left due a second later, and the sweep sends it no sooner")
    func retryAfterHonoured() throws {
        let fake = try FCMFake()
        let database = try IsolatedDatabase()
        let token = makeDeviceToken() + "QUOTA_ONCE"
        let household = try Self.household(caregivers: [[token]], in: database)
        let event = Self.event(household)
        #expect(Self.dispatch(event, fake: fake, overrides: ["DATABASE_URL": database.runtimeURL]).retryScheduled == 1)
        let due = try #require(try Self.backoffMilliseconds(eventKey: event.eventKey, in: database))
        #expect(due == 1000)
        #expect(Self.sweep(for: 4, fake: fake, in: database).sent == 1)
        let times = try fake.requests().compactMap { $0["receivedAtMs"]?.numberValue }
        try #require(times.count == 2)
        #expect(times[1] - times[0] >= 950)
    }

    @Test("always 503: the recording's send frees its worker after one attempt; the sweep retries with back-off")
    func alwaysUnavailable() throws {
        let fake = try FCMFake()
        let database = try IsolatedDatabase()
        let token = makeDeviceToken() + "UNAVAILABLE_ALWAYS"
        let household = try Self.household(caregivers: [[token]], in: database)
        let event = Self.event(household)
        let report = Self.dispatch(
            event, fake: fake, overrides: ["PUSH_SEND_DEADLINE_MS": "2500", "DATABASE_URL": database.runtimeURL])
        #expect(report.retryScheduled == 1 && report.failed == 0)
        let row = try #require(try Self.deliveries(eventKey: event.eventKey, in: database).first)
        #expect(row.status == "PENDING" && row.attempts == 1 && row.lastError?.contains("503 UNAVAILABLE") == true)
        // One attempt, so no back-off was waited out in the recording's process.
        #expect(try fake.requests().count == 1)
        // The sweep keeps retrying it inside its own leases, spaced by the back-off.
        Self.sweep(for: 4, fake: fake, in: database)
        let retried = try #require(try Self.deliveries(eventKey: event.eventKey, in: database).first)
        #expect(retried.status == "PENDING" && retried.attempts >= 2)
        let times = try fake.requests().compactMap { $0["receivedAtMs"]?.numberValue }
        #expect(times.count == retried.attempts)
        #expect(zip(times, times.dropFirst()).allSatisfy { $1 - $0 >= 240 })
    }

    @Test("a refused access token (401) is re-minted once and the send retried")
    func reMintOn401() throws {
        let fake = try FCMFake()
        let first = makeDeviceToken()
        let household = try Self.household(caregivers: [[first]])
        #expect(Self.dispatch(Self.event(household), fake: fake).sent == 1)
        #expect(try fake.mints == 1)
        try fake.configure(revokeAccessTokens: true)
        let report = Self.dispatch(Self.event(household), fake: fake)
        #expect(report.sent == 1)
        #expect(try fake.mints == 2)
        #expect(try fake.requests().map { $0["status"]?.integerValue } == [200, 401, 200])
    }

    @Test("concurrent cold dispatches against an empty token cache mint exactly one token")
    func oneMintForConcurrentColdStarts() throws {
        let fake = try FCMFake()
        let households = try (0..<8).map { _ in try Self.household(caregivers: [[makeDeviceToken()]]) }
        let sent = Mutex(0)
        let configuration = fake.configuration()
        DispatchQueue.concurrentPerform(iterations: households.count) { index in
            let report = Self.dispatch(Self.event(households[index]), configuration: configuration)
            sent.withLock { $0 += report.sent }
        }
        #expect(sent.withLock { $0 } == households.count)
        #expect(try fake.mints == 1)
    }

    @Test("the same event from 20 concurrent callers reaches each device exactly once")
    func concurrentDuplicates() throws {
        let fake = try FCMFake()
        let household = try Self.household(caregivers: [[makeDeviceToken(), makeDeviceToken()], [makeDeviceToken()]])
        let event = Self.event(household, group: nil)
        let sent = Mutex(0)
        let configuration = fake.configuration()
        DispatchQueue.concurrentPerform(iterations: 20) { _ in
            let report = Self.dispatch(event, configuration: configuration)
            sent.withLock { $0 += report.sent }
        }
        #expect(sent.withLock { $0 } == 3)
        let tokens = try fake.requests().compactMap { $0["token"]?.stringValue }
        #expect(tokens.count == 3 && Set(tokens) == household.allTokens)
    }

    @Test("no medication name reaches FCM or the log")
    func noHealthDataLeaves() throws {
        let fake = try FCMFake()
        let token = makeDeviceToken()
        let household = try Self.household(caregivers: [[token]])
        let medicationName = "ワーファリン-\(UUID().uuidString.prefix(6))"
        try TestDatabase.with { connection in
            try connection.query(
                """
                INSERT INTO medications (patient_id, name, start_date) VALUES (\(household.patient), \(medicationName), '2026-01-01')
                """)
        }
        let log = CapturedLog()
        #expect(Self.dispatch(Self.event(household), fake: fake, log: log).sent == 1)
        guard
            case .success(let raw) = CurlClient.perform(
                CurlRequest(url: fake.baseURL + "/_emulator/fcm/requests"), timeoutMilliseconds: 5000)
        else { Issue.record("fake did not answer"); return }
        let everythingSent = String(decoding: raw.body, as: UTF8.self)
        #expect(everythingSent.contains(token))
        #expect(!everythingSent.contains(medicationName) && !everythingSent.contains("ワーファリン"))
        #expect(!log.text.contains(medicationName) && !log.text.contains(token))
    }

    @Test("without a service account the push is skipped with one warning; without PUSH_ENVIRONMENT an error names it")
    func notConfigured() throws {
        let fake = try FCMFake()
        let token = makeDeviceToken()
        let household = try Self.household(caregivers: [[token]])
        let unconfigured = CapturedLog()
        let report = Self.dispatch(
            Self.event(household), fake: fake, log: unconfigured,
            overrides: ["FCM_SERVICE_ACCOUNT_JSON": nil, "FCM_API_BASE_URL": nil])
        #expect(report.skippedReason != nil && report.leased == 0)
        #expect(unconfigured.text.split(separator: "\n").filter { $0.contains("\"level\":\"warning\"") }.count == 1)
        let noEnvironment = CapturedLog()
        #expect(
            Self.dispatch(Self.event(household), fake: fake, log: noEnvironment, overrides: ["PUSH_ENVIRONMENT": nil])
                .leased == 0)
        #expect(noEnvironment.text.contains("\"config.variable\":\"PUSH_ENVIRONMENT\""))
        #expect(try fake.requests().isEmpty)
    }

    @Test("a malformed service account is an error naming the variable, and nothing is claimed")
    func malformedServiceAccount() throws {
        let fake = try FCMFake()
        let household = try Self.household(caregivers: [[makeDeviceToken()]])
        for value in ["not base64!", Data("{\"type\":\"service_account\"}".utf8).base64EncodedString()] {
            let log = CapturedLog()
            let report = Self.dispatch(
                Self.event(household), fake: fake, log: log, overrides: ["FCM_SERVICE_ACCOUNT_JSON": value])
            #expect(report.leased == 0)
            #expect(log.text.contains("\"config.variable\":\"FCM_SERVICE_ACCOUNT_JSON\""))
        }
    }
}

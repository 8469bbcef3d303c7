import Codecs
import Libpq
import OpenSSLCrypto
import Migrations
import CaregiverPush
import Foundation
import Logging
import Synchronization
import TestFixtures
import TestSupport

/// A household the load tests drive: one patient with a session, two linked caregivers with two devices each,
/// four scheduled medications (morning ×2, noon, bedtime) and one as-needed medication.
struct LoadHousehold: Sendable {
    struct Caregiver: Sendable {
        let id: UUID
        let jwt: String
        let tokens: [String]
    }

    let patient: UUID
    let patientToken: String
    let caregivers: [Caregiver]
    /// (medication, `HH:mm`)
    let scheduled: [(id: UUID, time: String)]
    let prn: UUID
    /// Idempotency keys the PRN requests draw from, so that some requests repeat one.
    let prnKeys: [String]

    var tokens: Set<String> { Set(caregivers.flatMap(\.tokens)) }

    /// Seeds a household in the database at `url`; every medication name carries `marker`, which the leak checks
    /// look for.
    static func seed(url: String, marker: String) throws -> LoadHousehold {
        let connection = try PostgresConnection(url: url, applicationName: "caregiver-push-tests")
        defer { connection.close() }
        try Migrator(directory: TestDatabase.migrationsDirectory).migrate(connection, logger: .init(label: "tests"))
        let patient = try Seed.patient(connection, displayName: "負荷")
        var caregivers: [Caregiver] = []
        for _ in 0..<2 {
            let id = UUID()
            try Seed.link(connection, caregiver: id, patient: patient)
            let tokens = (0..<2).map { _ in makeDeviceToken() }
            for token in tokens { try Seed.registerDevice(token, caregiver: id, connection: connection) }
            caregivers.append(Caregiver(id: id, jwt: try caregiverToken(id, expiresIn: 7200), tokens: tokens))
        }
        let times = ["07:00", "08:00", "12:00", "21:00"]
        let scheduled = try times.enumerated().map { index, time in
            (
                id: try Seed.medication(connection, patient: patient, name: "\(marker)薬\(index)", times: [time]),
                time: time
            )
        }
        return LoadHousehold(
            patient: patient, patientToken: try Seed.session(connection, patient: patient, expiresIn: 7200),
            caregivers: caregivers, scheduled: scheduled,
            prn: try Seed.medication(connection, patient: patient, name: "\(marker)頓服", isPRN: true),
            prnKeys: (0..<4).map { _ in UUID().uuidString.lowercased() })
    }
}

/// One request the load made and what came back.
struct LoadOutcome: Sendable {
    enum Kind: String, Sendable { case dose, slot, prn, register, unregister }

    let kind: Kind
    let household: Int
    /// The caregiver who recorded, `nil` when the patient did (or for device requests).
    let actingCaregiver: UUID?
    let status: Int
    let body: JSONValue?
    let contentType: String?
    let retryAfter: String?
    let idempotencyKey: String?
    /// Seconds since the load began.
    let started: Double
    let ended: Double

    /// The records this answer says exist (created now or before), with their push-relevant fields.
    var records: [JSONValue] {
        guard status == 200, let body else { return [] }
        switch kind {
        case .dose, .prn: return body["record"].map { [$0] } ?? []
        case .slot: return body["records"]?.arrayValue ?? []
        case .register, .unregister: return []
        }
    }

    var updatedCount: Int { Int(body?["updatedCount"]?.integerValue ?? 0) }
}

/// Mixed traffic (all five routes) from several client threads against a runner for a fixed time; every answer
/// is kept for the checks afterwards.
struct LoadDriver: Sendable {
    let client: RunnerClient
    let households: [LoadHousehold]
    /// A caregiver linked to nobody, whose devices come and go (register/unregister churn).
    let churnCaregiverJWT: String
    let churnTokens: [String]
    /// Past Tokyo dates the recordings use: few enough that requests collide.
    let dates: [String]

    init(client: RunnerClient, households: [LoadHousehold]) throws {
        self.client = client
        self.households = households
        churnCaregiverJWT = try caregiverToken(UUID(), expiresIn: 7200)
        churnTokens = (0..<6).map { _ in makeDeviceToken() }
        dates = (1...4).map { TokyoDay.offset(-$0) }
    }

    /// Runs `clients` threads for `seconds`; returns every outcome in completion order.
    func run(clients: Int, seconds: Double) -> [LoadOutcome] {
        let outcomes = Mutex<[LoadOutcome]>([])
        let start = ContinuousClock.now
        let deadline = start + .milliseconds(Int(seconds * 1000))
        DispatchQueue.concurrentPerform(iterations: clients) { _ in
            var generator = SystemRandomNumberGenerator()
            while ContinuousClock.now < deadline {
                let outcome = one(start: start, using: &generator)
                outcomes.withLock { $0.append(outcome) }
            }
        }
        return outcomes.withLock { $0 }
    }

    private func one(start: ContinuousClock.Instant, using generator: inout SystemRandomNumberGenerator) -> LoadOutcome
    {
        let index = Int.random(in: households.indices, using: &generator)
        let household = households[index]
        let date = dates.randomElement(using: &generator) ?? dates[0]
        let roll = Int.random(in: 0..<100, using: &generator)
        var kind = LoadOutcome.Kind.dose
        var actor: UUID?
        var bearer = household.patientToken
        var headers: [String: String] = [:]
        var body: [String: JSONValue]
        let path: String
        switch roll {
        case 0..<35:
            let medication = household.scheduled.randomElement(using: &generator) ?? household.scheduled[0]
            body = [
                "medicationId": .string(medication.id.uuidString.lowercased()),
                "scheduledAt": .string(TokyoDay.instant(date, medication.time)),
            ]
            if Bool.random(using: &generator), let caregiver = household.caregivers.randomElement(using: &generator) {
                actor = caregiver.id
                bearer = caregiver.jwt
                body["patientId"] = .string(household.patient.uuidString.lowercased())
            }
            path = "/api/dose-records"
        case 35..<55:
            kind = .slot
            let slot = ["morning", "noon", "bedtime"].randomElement(using: &generator) ?? "morning"
            body = ["date": .string(date), "slot": .string(slot)]
            path = "/api/dose-records/slot"
        case 55..<70:
            kind = .prn
            body = ["medicationId": .string(household.prn.uuidString.lowercased()), "quantity": .number(1)]
            // Mostly keyed from a small pool, so that retries with the same key happen concurrently.
            if Int.random(in: 0..<4, using: &generator) > 0,
                let key = household.prnKeys.randomElement(using: &generator)
            {
                headers["idempotency-key"] = key
            }
            path = "/api/prn-dose-records"
        case 70..<88:
            kind = .register
            // Either a household caregiver re-registering its own phone (idempotent), or the churn caregiver.
            if Bool.random(using: &generator), let caregiver = household.caregivers.randomElement(using: &generator),
                let token = caregiver.tokens.randomElement(using: &generator)
            {
                bearer = caregiver.jwt
                body = ["token": .string(token), "platform": .string("ios"), "environment": .string("DEV")]
            } else {
                bearer = churnCaregiverJWT
                body = [
                    "token": .string(churnTokens.randomElement(using: &generator) ?? churnTokens[0]),
                    "platform": .string("ios"),
                    "environment": .string("DEV"),
                ]
            }
            path = "/api/push/register"
        default:
            kind = .unregister
            bearer = churnCaregiverJWT
            body = ["token": .string(churnTokens.randomElement(using: &generator) ?? churnTokens[0])]
            path = "/api/push/unregister"
        }
        let began = ContinuousClock.now
        let answer = try? client.post(path, bearer: bearer, body: body, headers: headers)
        let ended = ContinuousClock.now
        return LoadOutcome(
            kind: kind, household: index, actingCaregiver: actor, status: answer?.status ?? 0, body: answer?.json,
            contentType: answer?.headers["content-type"], retryAfter: answer?.headers["retry-after"],
            idempotencyKey: headers["idempotency-key"],
            started: (began - start).seconds, ended: (ended - start).seconds)
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// What the load left in the database and at the FCM fake, checked against the answers it got.
struct LoadVerdict {
    var problems: [String] = []

    /// Every record an answer named is in the database, no dose is recorded twice, and (with `exhaustive`) every
    /// record in the database was named by some answer.
    mutating func checkRecords(_ outcomes: [LoadOutcome], households: [LoadHousehold], url: String, exhaustive: Bool)
        throws
    {
        let connection = try PostgresConnection(url: url, applicationName: "caregiver-push-tests")
        defer { connection.close() }
        for (index, household) in households.enumerated() {
            let answered = Set(
                outcomes.filter { $0.household == index && $0.kind != .prn }.flatMap(\.records)
                    .compactMap { $0["id"]?.stringValue })
            let answeredPRN = Set(
                outcomes.filter { $0.household == index && $0.kind == .prn }.flatMap(\.records)
                    .compactMap { $0["id"]?.stringValue })
            let stored = Set(
                try connection.query("SELECT id FROM dose_records WHERE patient_id = \(household.patient)")
                    .map { try $0.decode(UUID.self, at: 0).uuidString.lowercased() })
            let storedPRN = Set(
                try connection.query("SELECT id FROM prn_dose_records WHERE patient_id = \(household.patient)")
                    .map { try $0.decode(UUID.self, at: 0).uuidString.lowercased() })
            if !answered.isSubset(of: stored) {
                problems.append("household \(index): answered dose records missing from the database")
            }
            if !answeredPRN.isSubset(of: storedPRN) {
                problems.append("household \(index): answered PRN records missing")
            }
            if exhaustive && answered != stored { problems.append("household \(index): dose records no answer named") }
            if exhaustive && answeredPRN != storedPRN {
                problems.append("household \(index): PRN records no answer named")
            }
            let duplicates = try connection.query(
                """
                SELECT count(*) - count(DISTINCT (medication_id, scheduled_at)) FROM dose_records
                WHERE patient_id = \(household.patient)
                """)[0].decode(Int.self, at: 0)
            if duplicates != 0 { problems.append("household \(index): \(duplicates) duplicate dose records") }
            let keyed = try connection.query(
                """
                SELECT count(*) - count(DISTINCT idempotency_key) FROM prn_dose_records
                WHERE patient_id = \(household.patient) AND idempotency_key IS NOT NULL
                """)[0].decode(Int.self, at: 0)
            if keyed != 0 { problems.append("household \(index): \(keyed) PRN records repeat an idempotency key") }
            // Every answer for one idempotency key names the same record.
            for key in household.prnKeys {
                let named = Set(
                    outcomes.filter { $0.household == index && $0.idempotencyKey == key }.flatMap(\.records)
                        .compactMap { $0["id"]?.stringValue })
                if named.count > 1 {
                    problems.append("household \(index): one idempotency key answered \(named.count) records")
                }
            }
        }
    }

    /// At most one message per device and event and text on the wire (a second one is a correction); none about a patient to a caregiver not linked to it;
    /// and (with `exactlyOnce`) one to every recipient device of every answered recording with `updatedCount > 0`.
    mutating func checkPushes(
        _ outcomes: [LoadOutcome], households: [LoadHousehold], messages: [JSONValue], exactlyOnce: Bool
    ) {
        let ownerOf = Dictionary(
            uniqueKeysWithValues: households.flatMap { household in
                household.caregivers.flatMap { caregiver in caregiver.tokens.map { ($0, household.patient) } }
            })
        var perDeviceEvent: [String: [String]] = [:]
        var delivered: Set<String> = []
        for message in messages {
            guard let token = message["token"]?.stringValue, let patient = ownerOf[token] else { continue }
            let data = message["message"]?["data"]
            let collapse = message["message"]?["apns"]?["headers"]?["apns-collapse-id"]?.stringValue ?? ""
            perDeviceEvent["\(token)|\(collapse)", default: []].append(
                message["message"]?["notification"]?["body"]?.stringValue ?? "")
            if data?["patientId"]?.stringValue != patient.uuidString.lowercased() {
                problems.append("a message about another patient reached \(SHA256.hexPrefix(of: token))")
            }
            delivered.insert(
                [token, data?["date"]?.stringValue, data?["slot"]?.stringValue, data?["recordingGroupId"]?.stringValue]
                    .map { $0 ?? "?" }.joined(separator: "|"))
        }
        // A second message to a device about one event is a correction (docs/behaviour.md#corrections): its text
        // differs from every earlier one's, and an event's text can change at most twice.
        let repeated = perDeviceEvent.values.filter { Set($0).count < $0.count || $0.count > 3 }.count
        if repeated > 0 { problems.append("\(repeated) device/event pairs got one text twice") }
        guard exactlyOnce else { return }
        var missing = 0
        for outcome in outcomes where outcome.status == 200 && outcome.updatedCount > 0 {
            let household = households[outcome.household]
            let recipients = household.caregivers.filter { $0.id != outcome.actingCaregiver }.flatMap(\.tokens)
            let group = outcome.kind == .slot ? outcome.body?["recordingGroupId"]?.stringValue ?? "?" : ""
            guard let record = outcome.records.first else { continue }
            for token in recipients {
                let key = [token, record["date"]?.stringValue, record["slot"]?.stringValue, group]
                    .map { $0 ?? "?" }.joined(separator: "|")
                if !delivered.contains(key) { missing += 1 }
            }
        }
        if missing > 0 { problems.append("\(missing) recipient devices got no message for an answered recording") }
    }
}

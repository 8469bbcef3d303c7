import Codecs
import CaregiverPush
import Libpq
import Foundation
import Synchronization
import Testing
import TestFixtures
import TestSupport

/// The cap on a caregiver's enabled devices (`PUSH_MAX_DEVICES_PER_CAREGIVER`, 10 by default): past it the least
/// recently seen device is disabled as `REPLACED`, under concurrent registrations too, and one event is never sent
/// to more than the cap per linked caregiver.
@Suite("device cap per caregiver")
struct DeviceCapTests {
    static func register(_ caregiver: String, token: String, environment: [String: String] = testEnvironment())
        -> Invocation
    {
        let body = json(["token": .string(token), "platform": .string("ios"), "environment": .string("DEV")])
        return invoke(PushRegister(), event: makeEvent(bearer: caregiver, body: body), environment: environment)
    }

    /// The caregiver's devices: (token, enabled, reason), oldest registration first.
    static func devices(of caregiver: UUID) throws -> [(token: String, enabled: Bool, reason: String?)] {
        try TestDatabase.with { connection in
            try connection.query(
                """
                SELECT token, is_enabled, disabled_reason FROM push_devices
                WHERE owner_type = 'CAREGIVER' AND owner_id = \(caregiver) ORDER BY created_at, token
                """
            ).map { try ($0.decode(String.self, at: 0), $0.decode(Bool.self, at: 1), $0.decode(String?.self, at: 2)) }
        }
    }

    @Test("the 11th and 12th devices of a caregiver disable the two least recently seen as REPLACED")
    func capReplacesLeastRecentlySeen() throws {
        let caregiver = UUID()
        let bearer = try caregiverToken(caregiver)
        let tokens = (0..<12).map { _ in makeDeviceToken() }
        for token in tokens { #expect(Self.register(bearer, token: token).status == 200) }
        let devices = try Self.devices(of: caregiver)
        #expect(devices.filter(\.enabled).count == 10)
        #expect(Set(devices.filter { !$0.enabled }.map(\.token)) == Set(tokens.prefix(2)))
        #expect(devices.filter { !$0.enabled }.allSatisfy { $0.reason == "REPLACED" })
        // Seen again, an old device comes back; the least recently seen of the others makes room.
        #expect(Self.register(bearer, token: tokens[0]).status == 200)
        let after = try Self.devices(of: caregiver)
        #expect(after.filter(\.enabled).count == 10)
        #expect(Set(after.filter { !$0.enabled }.map(\.token)) == [tokens[1], tokens[2]])
    }

    @Test("a registration reports what each of its statements changed: rotation, hand-over and cap, each its own count")
    func registrationCounts() throws {
        let (first, second) = (UUID(), UUID())
        let tokens = (0..<4).map { _ in makeDeviceToken() }
        func device(_ index: Int, installation: String?) -> PushDeviceRegistry.Registration {
            .init(token: tokens[index], platform: .ios, environment: .development, installationID: installation)
        }
        func counts(_ result: PushDeviceRegistry.RegistrationResult) -> [Int] {
            [result.replaced, result.reassigned, result.overCap]
        }
        try TestDatabase.with { connection in
            let registry = PushDeviceRegistry(connection: connection)
            let installation = "install-\(UUID().uuidString)"
            let initial = try registry.register(device(0, installation: installation), caregiverID: first, deviceCap: 3)
            #expect(counts(initial) == [0, 0, 0])
            _ = try registry.register(device(1, installation: nil), caregiverID: first, deviceCap: 3)
            // The same installation with a new token: the old token's device is rotated out.
            let rotated = try registry.register(device(2, installation: installation), caregiverID: first, deviceCap: 3)
            #expect(counts(rotated) == [1, 0, 0])
            // Another caregiver takes the first caregiver's token 1: handed over.
            let handedOver = try registry.register(device(1, installation: nil), caregiverID: second, deviceCap: 3)
            #expect(counts(handedOver) == [0, 1, 0])
            // A cap of 1 leaves only the device registering now.
            let capped = try registry.register(device(3, installation: nil), caregiverID: first, deviceCap: 1)
            #expect(counts(capped) == [0, 0, 1])
            #expect(capped.deviceID != initial.deviceID)
        }
    }

    @Test("40 distinct tokens of one caregiver leave the cap enabled and only the 20 most recently disabled rows")
    func disabledRowsAreCapped() throws {
        let caregiver = UUID()
        let bearer = try caregiverToken(caregiver)
        let tokens = (0..<40).map { _ in makeDeviceToken() }
        for token in tokens { #expect(Self.register(bearer, token: token).status == 200) }
        let devices = try Self.devices(of: caregiver)
        #expect(devices.filter(\.enabled).count == 10)
        #expect(devices.filter { !$0.enabled }.count == PushDeviceRegistry.disabledRowsKept)
        #expect(devices.count == 30)
        // The ones kept are the most recently disabled: the 11th to 30th registered.
        #expect(Set(devices.filter { !$0.enabled }.map(\.token)) == Set(tokens[10..<30]))
    }

    @Test("a device token over 512 characters is a 422 naming the field, and nothing is stored")
    func tokenLength() throws {
        let caregiver = UUID()
        let bearer = try caregiverToken(caregiver)
        let long = String(repeating: "a", count: 513)
        let refused = Self.register(bearer, token: long)
        #expect(refused.status == 422)
        #expect(fieldErrors(refused)["token"]?.contains("512") == true)
        #expect(try Self.devices(of: caregiver).isEmpty)
        #expect(Self.register(bearer, token: String(repeating: "a", count: 512)).status == 200)
        // The table holds the same bound for whoever writes to it.
        let error = #expect(throws: PostgresError.self) {
            try TestDatabase.with { connection in
                try connection.query(
                    """
                    INSERT INTO push_devices (owner_type, owner_id, token, token_sha256, platform, environment)
                    VALUES ('CAREGIVER', \(caregiver), \(long), sha256(convert_to(\(long), 'UTF8')), 'ios', 'DEV')
                    """)
            }
        }
        #expect(error?.sqlState == .checkViolation)
    }

    @Test("20 concurrent registrations of one caregiver leave exactly the cap enabled")
    func capHoldsUnderConcurrency() throws {
        for cap in [10, 3] {
            let caregiver = UUID()
            let bearer = try caregiverToken(caregiver)
            let tokens = (0..<20).map { _ in makeDeviceToken() }
            let statuses = Mutex<[Int]>([])
            let environment = testEnvironment(["PUSH_MAX_DEVICES_PER_CAREGIVER": String(cap)])
            DispatchQueue.concurrentPerform(iterations: tokens.count) { index in
                let status = Self.register(bearer, token: tokens[index], environment: environment).status
                statuses.withLock { $0.append(status) }
            }
            #expect(statuses.withLock { $0 } == Array(repeating: 200, count: 20))
            let devices = try Self.devices(of: caregiver)
            #expect(devices.count == 20)
            #expect(devices.filter(\.enabled).count == cap, "cap \(cap)")
            #expect(devices.filter { !$0.enabled }.allSatisfy { $0.reason == "REPLACED" })
        }
    }

    @Test("a registration that waits for the caregiver's lock counts the registration that held it: the cap holds")
    func capCountsTheRegistrationItWaitedFor() throws {
        let caregiver = UUID()
        let bearer = try caregiverToken(caregiver)
        let environment = testEnvironment(["PUSH_MAX_DEVICES_PER_CAREGIVER": "3"])
        let tokens = (0..<4).map { _ in makeDeviceToken() }
        for token in tokens.prefix(2) {
            #expect(Self.register(bearer, token: token, environment: environment).status == 200)
        }
        // A third registration caught mid-transaction: the caregiver's lock held, its row written, not committed.
        let holder = try LockHolder()
        defer { holder.release() }
        try holder.connection.query(
            """
            SELECT * FROM caregiver_push.register_push_device(
                \(caregiver), \(tokens[2]), sha256(convert_to(\(tokens[2]), 'UTF8')), 'ios', 'DEV', NULL, 3, 20)
            """)
        let fourth = Background { Self.register(bearer, token: tokens[3], environment: environment) }
        #expect(try eventually(seconds: 10) { try holder.isBlockingSomeone }, "the fourth registration never waited")
        try holder.connection.query("COMMIT")
        #expect(fourth.wait().status == 200)
        // Had it not waited, it would have counted two devices besides its own and left four enabled.
        let devices = try Self.devices(of: caregiver)
        #expect(Set(devices.filter(\.enabled).map(\.token)) == Set(tokens.suffix(3)))
        #expect(devices.first { $0.token == tokens[0] }?.reason == "REPLACED")
    }

    @Test("one event owes at most the cap of deliveries per linked caregiver, however many devices are enabled")
    func fanOutIsCapped() throws {
        let database = try IsolatedDatabase()
        let (patient, caregivers) = try database.with { connection in
            let patient = try Seed.patient(connection)
            let caregivers = [UUID(), UUID()]
            for caregiver in caregivers {
                try Seed.link(connection, caregiver: caregiver, patient: patient)
                // Enabled devices past the cap, as a table from before the cap would hold.
                for index in 0..<15 {
                    let token = makeDeviceToken()
                    try connection.query(
                        """
                        INSERT INTO push_devices
                            (owner_type, owner_id, token, token_sha256, platform, environment, last_seen_at)
                        VALUES ('CAREGIVER', \(caregiver), \(token), sha256(convert_to(\(token), 'UTF8')), 'ios',
                                'DEV', now() - \(String(index * 10))::interval)
                        """)
                }
            }
            return (patient, caregivers)
        }
        let event = DoseTakenEvent(
            patientID: AppID(patient), date: "2026-02-11", slot: .morning, recordingGroupID: AppID(UUID()),
            takenAt: Date(),
            withinTime: true, actingCaregiverID: nil)
        let owed = try database.with { connection in
            try connection.withTransaction {
                try PushOutbox.enqueue(event, source: .slotBulkRecord, environment: .development, connection: $0)
            }
        }
        #expect(owed == 10 * caregivers.count)
        let perCaregiver = try database.with { connection in
            try connection.query(
                """
                SELECT d.owner_id, count(*), min(d.last_seen_at) > now() - interval '95 seconds'
                FROM push_deliveries x JOIN push_devices d ON d.id = x.push_device_id
                WHERE x.event_key = \(event.eventKey) GROUP BY d.owner_id
                """
            ).map { try ($0.decode(UUID.self, at: 0), $0.decode(Int.self, at: 1), $0.decode(Bool.self, at: 2)) }
        }
        #expect(Set(perCaregiver.map(\.0)) == Set(caregivers))
        // The ten most recently seen of each caregiver's fifteen.
        #expect(perCaregiver.allSatisfy { $0.1 == 10 && $0.2 })
    }
}

import CaregiverPush
import Codecs
import Foundation
import Testing
import TestFixtures
import TestSupport

/// Registration by Firebase Installation ID (docs/behaviour.md#devices): push-register takes a `fid` instead of a
/// `token`, the message addresses it by HTTP v1's `fid`, and an installation that moves from its token to its FID is
/// one device, told each later push once, by its FID.
@Suite("FID registration")
struct FIDRegistrationTests {
    /// A FID's shape: 22 characters of URL-safe base64 (16 random bytes).
    static func makeFID() -> String {
        String(Base64URL.encode((0..<16).map { _ in UInt8.random(in: 0...255) }).prefix(22))
    }

    static func register(_ caregiver: UUID, _ identity: [String: JSONValue]) throws -> Invocation {
        var body = identity
        body["platform"] = .string("ios")
        body["environment"] = .string("DEV")
        return invoke(
            PushRegister(),
            event: makeEvent(path: "/api/push/register", bearer: try caregiverToken(caregiver), body: json(body)))
    }

    @Test("an installation moving from its token to its FID gets each later push once, by its FID")
    func tokenToFID() throws {
        let fake = try FCMFake()
        let household = try RecordingHousehold.make(devicesPerCaregiver: [0])
        let caregiver = household.caregivers[0].id
        let (token, fid, installation) = (makeDeviceToken(), Self.makeFID(), UUID().uuidString.lowercased())
        // The app before the update: its token, with the installation's id the kit keeps.
        #expect(
            try Self.register(caregiver, ["token": .string(token), "installationId": .string(installation)]).status
                == 200)
        let first = try Executables.run(
            "dose-record", input: try Executables.fixture("dose-record/patient.json", household.values()),
            environment: fake.environment())
        #expect(first.body?["updatedCount"] == .number(1), "\(first.stderr)")
        #expect(try fake.messages(to: [token]).count == 1)
        // After the update: the FID, with the same installation's id.
        #expect(
            try Self.register(caregiver, ["fid": .string(fid), "installationId": .string(installation)]).status == 200)
        let devices = try TestDatabase.with { try Seed.devices($0, owner: caregiver) }
        #expect(devices.filter(\.isEnabled).count == 1)
        #expect(devices.first { !$0.isEnabled }?.disabledReason == "REPLACED")
        let second = try Executables.run(
            "dose-record",
            input: try Executables.fixture(
                "dose-record/patient.json",
                household.values([
                    "MEDICATION_ID": household.morning[1].uuidString.lowercased(),
                    "SCHEDULED_AT": TokyoDay.instant(household.date, "08:00"),
                ])),
            environment: fake.environment())
        #expect(second.body?["updatedCount"] == .number(1), "\(second.stderr)")
        // The token was told once (the first dose); the FID once (the second), named by `fid` and never by `token`.
        #expect(try fake.messages(to: [token]).count == 1)
        let byFID = try fake.messages(to: [fid])
        #expect(byFID.count == 1)
        #expect(byFID.first?["message"]?["fid"] == .string(fid) && byFID.first?["message"]?["token"] == nil)
        #expect(byFID.first?["message"]?["data"]?["type"] == .string("DOSE_TAKEN"))
    }

    @Test("a token and a FID together, or a FID of the wrong shape, is a 422 naming fid, and nothing is stored")
    func refusals() throws {
        let caregiver = UUID()
        for (identity, message) in [
            (
                ["token": JSONValue.string(makeDeviceToken()), "fid": .string(Self.makeFID())],
                "send token or fid, not both"
            ),
            (["token": .string(makeDeviceToken()), "fid": .null], "send token or fid, not both"),
            (["fid": .string("short")], "fid must be a Firebase Installation ID: 22 characters of A-Z a-z 0-9 - _"),
            (
                ["fid": .string(String(repeating: ".", count: 22))],
                "fid must be a Firebase Installation ID: 22 characters of A-Z a-z 0-9 - _"
            ),
        ] {
            let result = try Self.register(caregiver, identity)
            #expect(result.status == 422, "\(identity)")
            #expect(String(describing: result.json).contains(message), "\(String(describing: result.json))")
        }
        #expect(try TestDatabase.with { try Seed.devices($0, owner: caregiver) }.isEmpty)
    }

    @Test("language: a BCP 47 tag stored as its primary language; omitted keeps it; anything else is a 422")
    func language() throws {
        let caregiver = UUID()
        let fid = Self.makeFID()
        func stored() throws -> [String] {
            try TestDatabase.with { connection in
                try connection.query(
                    "SELECT language FROM push_devices WHERE owner_id = \(caregiver) AND token = \(fid)"
                ).map { try $0.decode(String.self, at: 0) }
            }
        }
        #expect(try Self.register(caregiver, ["fid": .string(fid)]).status == 200)
        #expect(try stored() == ["ja"])
        #expect(try Self.register(caregiver, ["fid": .string(fid), "language": .string("en-GB")]).status == 200)
        #expect(try stored() == ["en"])
        #expect(try Self.register(caregiver, ["fid": .string(fid)]).status == 200)
        #expect(try stored() == ["en"])
        for bad: JSONValue in [
            .string("english"), .string("e"), .string("ja_JP"), .string("ja--JP"), .string("日本語"), .number(1),
            .string("en-" + String(repeating: "a", count: 33)),
        ] {
            let result = try Self.register(caregiver, ["fid": .string(fid), "language": bad])
            #expect(result.status == 422, "\(bad)")
            #expect(String(describing: result.json).contains("language must be a BCP 47 language tag"))
        }
        #expect(try stored() == ["en"])
    }

    @Test("push-unregister takes the FID too")
    func unregisterByFID() throws {
        let caregiver = UUID()
        let fid = Self.makeFID()
        #expect(try Self.register(caregiver, ["fid": .string(fid)]).status == 200)
        let result = invoke(
            PushUnregister(),
            event: makeEvent(
                path: "/api/push/unregister", bearer: try caregiverToken(caregiver),
                body: json(["fid": .string(fid)])))
        #expect(result.status == 200)
        let devices = try TestDatabase.with { try Seed.devices($0, owner: caregiver) }
        #expect(devices.count == 1 && devices.first?.disabledReason == "USER_DISABLED")
    }
}

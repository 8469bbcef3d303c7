import Codecs
import CaregiverPush
import Foundation
import Testing
import TestFixtures
import TestSupport

/// push-register and push-unregister in-process, against the real database (docs/behaviour.md#push-register,
/// docs/behaviour.md#push-unregister, docs/behaviour.md#devices).
@Suite("push-register and push-unregister")
struct PushRegistrationTests {
    func register(
        as caregiver: UUID, token: String, platform: String = "ios", environment: String = "DEV",
        installationID: String? = nil
    ) throws -> Invocation {
        var body: [String: JSONValue] = [
            "token": .string(token), "platform": .string(platform), "environment": .string(environment),
        ]
        if let installationID { body["installationId"] = .string(installationID) }
        return invoke(
            PushRegister(),
            event: makeEvent(path: "/api/push/register", bearer: try caregiverToken(caregiver), body: json(body)))
    }

    func unregister(as caregiver: UUID, token: String) throws -> Invocation {
        invoke(
            PushUnregister(),
            event: makeEvent(
                path: "/api/push/unregister", bearer: try caregiverToken(caregiver),
                body: json(["token": .string(token)])))
    }

    @Test("register creates an enabled device with its platform and environment")
    func registerCreatesDevice() throws {
        let caregiver = UUID()
        let token = makeDeviceToken()
        let result = try register(as: caregiver, token: token, environment: "PROD")
        #expect(result.status == 200)
        #expect(result.json == .object(["ok": .bool(true)]))
        #expect(result.response.headers["content-type"] == "application/json")
        let devices = try TestDatabase.with { try Seed.devices($0, token: token) }
        #expect(devices.count == 1)
        #expect(devices.first?.ownerID == caregiver)
        #expect(devices.first?.platform == "ios")
        #expect(devices.first?.environment == "PROD")
        #expect(devices.first?.isEnabled == true)
        #expect(devices.first?.disabledReason == nil)
    }

    @Test("re-registering the same token keeps one row and advances last_seen_at")
    func reRegisterIsIdempotent() throws {
        let caregiver = UUID()
        let token = makeDeviceToken()
        #expect(try register(as: caregiver, token: token).status == 200)
        let first = try TestDatabase.with { try Seed.devices($0, token: token) }
        Thread.sleep(forTimeInterval: 0.01)
        #expect(try register(as: caregiver, token: token, environment: "PROD").status == 200)
        let second = try TestDatabase.with { try Seed.devices($0, token: token) }
        #expect(second.count == 1)
        #expect(try #require(second.first).lastSeenAt > (try #require(first.first)).lastSeenAt)
        #expect(second.first?.environment == "PROD")
    }

    @Test("a second token of the same caregiver is a second device")
    func secondTokenSecondRow() throws {
        let caregiver = UUID()
        #expect(try register(as: caregiver, token: makeDeviceToken()).status == 200)
        #expect(try register(as: caregiver, token: makeDeviceToken()).status == 200)
        let devices = try TestDatabase.with { try Seed.devices($0, owner: caregiver) }
        #expect(devices.count == 2)
        #expect(devices.filter(\.isEnabled).count == 2)
    }

    @Test("unregister soft-disables the device with USER_DISABLED and keeps the row")
    func unregisterSoftDisables() throws {
        let caregiver = UUID()
        let token = makeDeviceToken()
        _ = try register(as: caregiver, token: token)
        let result = try unregister(as: caregiver, token: token)
        #expect(result.status == 200)
        #expect(result.json == .object(["ok": .bool(true)]))
        let devices = try TestDatabase.with { try Seed.devices($0, token: token) }
        #expect(devices.count == 1)
        #expect(devices.first?.isEnabled == false)
        #expect(devices.first?.disabledReason == "USER_DISABLED")
    }

    @Test("unregistering an unknown token is 200 and changes nothing")
    func unregisterUnknownToken() throws {
        let token = makeDeviceToken()
        let result = try unregister(as: UUID(), token: token)
        #expect(result.status == 200)
        #expect(try TestDatabase.with { try Seed.devices($0, token: token) }.isEmpty)
    }

    @Test("registering again re-enables an unregistered device")
    func reRegisterReEnables() throws {
        let caregiver = UUID()
        let token = makeDeviceToken()
        _ = try register(as: caregiver, token: token)
        _ = try unregister(as: caregiver, token: token)
        #expect(try register(as: caregiver, token: token).status == 200)
        let devices = try TestDatabase.with { try Seed.devices($0, token: token) }
        #expect(devices.count == 1)
        #expect(devices.first?.isEnabled == true)
        #expect(devices.first?.disabledReason == nil)
    }

    @Test("a new token from the same installation replaces the old one (REPLACED)")
    func installationRotation() throws {
        let caregiver = UUID()
        let installation = "install-\(UUID().uuidString)"
        let oldToken = makeDeviceToken()
        let newToken = makeDeviceToken()
        let otherInstallToken = makeDeviceToken()
        _ = try register(as: caregiver, token: oldToken, installationID: installation)
        _ = try register(as: caregiver, token: otherInstallToken, installationID: "another-\(UUID().uuidString)")
        #expect(try register(as: caregiver, token: newToken, installationID: installation).status == 200)
        try TestDatabase.with { connection in
            let old = try #require(try Seed.devices(connection, token: oldToken).first)
            #expect(old.isEnabled == false)
            #expect(old.disabledReason == "REPLACED")
            let new = try #require(try Seed.devices(connection, token: newToken).first)
            #expect(new.isEnabled && new.installationID == installation)
            #expect(try Seed.devices(connection, token: otherInstallToken).first?.isEnabled == true)
        }
    }

    @Test("a token registered by another caregiver moves to them (TOKEN_REASSIGNED)")
    func handOver() throws {
        let first = UUID()
        let second = UUID()
        let token = makeDeviceToken()
        _ = try register(as: first, token: token)
        #expect(try register(as: second, token: token).status == 200)
        let devices = try TestDatabase.with { try Seed.devices($0, token: token) }
        #expect(devices.count == 2)
        let previous = try #require(devices.first { $0.ownerID == first })
        let current = try #require(devices.first { $0.ownerID == second })
        #expect(previous.isEnabled == false && previous.disabledReason == "TOKEN_REASSIGNED")
        #expect(current.isEnabled && current.disabledReason == nil)
    }

    @Test("two caregivers registering one token at once leave exactly one enabled row")
    func concurrentHandOver() throws {
        for _ in 0..<10 {
            let token = makeDeviceToken()
            let owners = [UUID(), UUID(), UUID(), UUID()]
            let tokens = try owners.map { try caregiverToken($0) }
            DispatchQueue.concurrentPerform(iterations: owners.count) { index in
                let body = json(["token": .string(token), "platform": .string("ios"), "environment": .string("DEV")])
                _ = invoke(PushRegister(), event: makeEvent(bearer: tokens[index], body: body))
            }
            let devices = try TestDatabase.with { try Seed.devices($0, token: token) }
            #expect(devices.count == owners.count)
            #expect(devices.filter(\.isEnabled).count == 1)
        }
    }

    @Test("caregiver B can never disable caregiver A's device")
    func crossOwnerIsolation() throws {
        let owner = UUID()
        let intruder = UUID()
        let token = makeDeviceToken()
        _ = try register(as: owner, token: token)
        let result = try unregister(as: intruder, token: token)
        #expect(result.status == 200)
        let devices = try TestDatabase.with { try Seed.devices($0, token: token) }
        #expect(devices.count == 1)
        #expect(devices.first?.ownerID == owner)
        #expect(devices.first?.isEnabled == true)
    }

    @Test("a token of 512 characters registers; 513 is a validation error")
    func longestToken() throws {
        let caregiver = UUID()
        let longest = String(repeating: "a", count: 512 - 36) + UUID().uuidString
        #expect(try register(as: caregiver, token: longest).status == 200)
        #expect(try TestDatabase.with { try Seed.devices($0, token: longest) }.count == 1)
        let tooLong = try register(as: caregiver, token: longest + "b")
        #expect(tooLong.status == 422)
        #expect(fieldErrors(tooLong) == ["token": "token must be 1 to 512 characters of A-Z a-z 0-9 _ : . -"])
    }

    @Test(
        "validation failures are 422 with the messages docs/behaviour.md#validation-messages lists",
        arguments: [
            (["platform": "ios", "environment": "DEV"], ["token": "token is required"]),
            (["token": "abc", "platform": "android", "environment": "DEV"], ["platform": "platform must be ios"]),
            (["token": "abc", "platform": "ios"], ["environment": "environment must be DEV or PROD"]),
            (
                ["token": "abc", "platform": "ios", "environment": "dev"],
                ["environment": "environment must be DEV or PROD"]
            ),
            (
                [:],
                [
                    "token": "token is required", "platform": "platform must be ios",
                    "environment": "environment must be DEV or PROD",
                ]
            ),
            (
                ["token": "has space", "platform": "ios", "environment": "DEV"],
                ["token": "token must be 1 to 512 characters of A-Z a-z 0-9 _ : . -"]
            ),
        ] as [([String: String], [String: String])]
    )
    func validation(body: [String: String], expected: [String: String]) throws {
        let result = invoke(
            PushRegister(),
            event: makeEvent(bearer: try caregiverToken(UUID()), body: json(body.mapValues { .string($0) })))
        #expect(result.status == 422)
        #expect(result.response.headers["content-type"] == "application/problem+json")
        #expect(result.json?["type"] == .string("/problems/validation"))
        #expect(result.json?["status"] == .number(422))
        #expect(fieldErrors(result) == expected)
    }

    @Test("a non-string installationId or one over 128 characters is rejected")
    func installationIDValidation() throws {
        for value: JSONValue in [.number(5), .string(String(repeating: "i", count: 129)), .string("")] {
            let body = json([
                "token": .string(makeDeviceToken()), "platform": .string("ios"), "environment": .string("DEV"),
                "installationId": value,
            ])
            let result = invoke(PushRegister(), event: makeEvent(bearer: try caregiverToken(UUID()), body: body))
            #expect(result.status == 422)
            #expect(fieldErrors(result).keys.sorted() == ["installationId"])
        }
    }

    @Test("unregister without a token is 422 'token is required'")
    func unregisterValidation() throws {
        let result = invoke(PushUnregister(), event: makeEvent(bearer: try caregiverToken(UUID()), body: "{}"))
        #expect(result.status == 422)
        #expect(fieldErrors(result) == ["token": "token is required"])
    }

    func status(as caregiver: UUID, token: String, statusOnly: JSONValue = .bool(true)) throws -> Invocation {
        invoke(
            PushRegister(),
            event: makeEvent(
                path: "/api/push/register", bearer: try caregiverToken(caregiver),
                body: json([
                    "token": .string(token), "platform": .string("ios"), "environment": .string("DEV"),
                    "statusOnly": statusOnly,
                ])))
    }

    @Test("statusOnly answers the caller's record of the token and changes nothing: enabled, disabled with why, none")
    func statusOnly() throws {
        let caregiver = UUID()
        let token = makeDeviceToken()
        let none = try status(as: caregiver, token: token)
        #expect(none.status == 200 && none.json == .object(["ok": .bool(true), "device": .null]))
        #expect(try TestDatabase.with { try Seed.devices($0, owner: caregiver) }.isEmpty)
        #expect(try register(as: caregiver, token: token).status == 200)
        let before = try TestDatabase.with { try Seed.devices($0, owner: caregiver) }
        let enabled = try status(as: caregiver, token: token)
        #expect(enabled.json?["device"] == .object(["enabled": .bool(true), "disabledReason": .null]))
        try TestDatabase.with { connection in
            try connection.query(
                "UPDATE push_devices SET is_enabled = false, disabled_reason = 'UNREGISTERED' WHERE owner_id = \(caregiver)"
            )
        }
        let disabled = try status(as: caregiver, token: token)
        #expect(
            disabled.json?["device"] == .object(["enabled": .bool(false), "disabledReason": .string("UNREGISTERED")]))
        // Read-only: the disabled row stays disabled and last_seen_at does not move.
        let after = try TestDatabase.with { try Seed.devices($0, owner: caregiver) }
        #expect(after.map(\.isEnabled) == [false] && after.first?.lastSeenAt == before.first?.lastSeenAt)
        // Another caregiver learns nothing of this one's device; statusOnly false is a registration.
        #expect(try status(as: UUID(), token: token).json?["device"] == .null)
        #expect(try status(as: caregiver, token: token, statusOnly: .bool(false)).json == .object(["ok": .bool(true)]))
        #expect(try TestDatabase.with { try Seed.devices($0, owner: caregiver) }.map(\.isEnabled) == [true])
    }

    @Test("statusOnly must be a boolean; the rest of the body is still validated")
    func statusOnlyValidation() throws {
        for value: JSONValue in [.string("true"), .number(1), .array([])] {
            let result = try status(as: UUID(), token: makeDeviceToken(), statusOnly: value)
            #expect(result.status == 422 && fieldErrors(result) == ["statusOnly": "statusOnly must be a boolean"])
        }
        let result = invoke(
            PushRegister(),
            event: makeEvent(
                bearer: try caregiverToken(UUID()),
                body: json(["token": .string("bad token"), "statusOnly": .bool(true)])))
        #expect(result.status == 422 && fieldErrors(result).keys.sorted() == ["environment", "platform", "token"])
    }

    @Test("unknown fields in the body are ignored")
    func unknownFieldsIgnored() throws {
        let body = json([
            "token": .string(makeDeviceToken()), "platform": .string("ios"), "environment": .string("DEV"),
            "color": .string("blue"),
        ])
        #expect(invoke(PushRegister(), event: makeEvent(bearer: try caregiverToken(UUID()), body: body)).status == 200)
    }
}

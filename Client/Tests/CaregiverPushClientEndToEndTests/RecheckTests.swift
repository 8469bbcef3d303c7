import CaregiverPushClient
import CaregiverPushClientTestSupport
import Foundation
import Testing

/// A changed token and a device the server disabled: on launch and on every return to the foreground the app re-checks permission, token and the
/// server's record of the phone, against a real runner, PostgreSQL and the FCM emulator.
@MainActor
@Suite(
    "kit: re-checks on launch and return to the foreground",
    .timeLimit(.minutes(2)))
struct RecheckTests {
    static func rows(_ app: CaregiverApp) throws -> [Seed.Device] {
        try TestDatabase.with { try Seed.devices($0, owner: app.caregiver) }
    }

    @Test("permission revoked in the Settings app between launches → OFF with the reason, and the server is told")
    func permissionRevokedBetweenLaunches() async throws {
        let server = try RunnerServer.forClient()
        let app = await CaregiverApp.enabled(baseURL: server.baseURL)
        #expect(await app.settings.recheck() == .unchanged)
        // The caregiver turns notifications off in the Settings app; the app is launched again.
        app.permission.status = .denied
        let next = app.relaunched(baseURL: server.baseURL)
        #expect(next.settings.isPushEnabled)
        #expect(await next.settings.recheck() == .turnedOff(.permissionRevoked))
        #expect(!next.settings.isPushEnabled && next.settings.offReason == .permissionRevoked)
        let rows = try Self.rows(app)
        #expect(rows.map(\.isEnabled) == [false] && rows.first?.disabledReason == "USER_DISABLED")
        // The reason survives another launch, until the caregiver turns push on again.
        let third = app.relaunched(baseURL: server.baseURL)
        #expect(!third.settings.isPushEnabled && third.settings.offReason == .permissionRevoked)
        #expect(await third.settings.recheck() == .notApplicable)
        app.permission.status = .allowed
        await third.settings.setPushEnabled(true)
        #expect(third.settings.isPushEnabled && third.settings.offReason == nil)
        #expect(try Self.rows(app).map(\.isEnabled) == [true])
    }

    @Test(
        "permission revoked while the server is unreachable → OFF at once; the server is told at the next re-check")
    func revokedOffline() async throws {
        let up = try RunnerServer.forClient()
        let app = await CaregiverApp.enabled(baseURL: up.baseURL)
        let down = try PushTokenLifecycleTests.serverWithoutDatabase()
        app.permission.status = .denied
        let offline = app.relaunched(baseURL: down.baseURL)
        #expect(await offline.settings.recheck() == .turnedOff(.permissionRevoked))
        #expect(!offline.settings.isPushEnabled)
        #expect(app.store.values[PushTokenLifecycle.StateKey.pendingUnregisterToken] == app.tokenSource.token)
        #expect(try Self.rows(app).map(\.isEnabled) == [true])
        let online = app.relaunched(baseURL: up.baseURL)
        #expect(await online.settings.recheck() == .notApplicable)
        #expect(app.store.values[PushTokenLifecycle.StateKey.pendingUnregisterToken] == nil)
        #expect(try Self.rows(app).map(\.disabledReason) == ["USER_DISABLED"])
    }

    @Test("the token changed while the app was in the background → registered again on return to the foreground")
    func tokenChanged() async throws {
        let server = try RunnerServer.forClient()
        let app = await CaregiverApp.enabled(baseURL: server.baseURL)
        let old = app.tokenSource.token
        app.tokenSource.token = makeDeviceToken()
        #expect(await app.settings.recheck() == .reregistered)
        let rows = try Self.rows(app)
        #expect(rows.map(\.token) == [old, app.tokenSource.token] && rows.map(\.isEnabled) == [false, true])
        #expect(rows.first?.disabledReason == "REPLACED")
        #expect(await app.settings.recheck() == .unchanged && app.settings.isPushEnabled)
    }

    @Test("a token FCM rejects: the server disables it on the next push, and the app learns it and shows OFF")
    func tokenFCMRejects() async throws {
        let server = try RunnerServer.forClient()
        let app = CaregiverApp(baseURL: server.baseURL, token: makeDeviceToken(marker: "UNREGISTERED"))
        await app.settings.setPushEnabled(true)
        let (session, medication) = try TestDatabase.with { database in
            let patient = try Seed.patient(database)
            try Seed.link(database, caregiver: app.caregiver, patient: patient)
            return (
                try Seed.session(database, patient: patient),
                try Seed.medication(database, patient: patient, times: ["08:00"])
            )
        }
        #expect(await app.settings.recheck() == .unchanged)
        let dose = try await server.post(
            "/api/dose-records", bearer: session,
            body: [
                "medicationId": medication.uuidString.lowercased(),
                "scheduledAt": TokyoDay.instant(TokyoDay.offset(-1), "08:00"),
            ])
        #expect(dose.status == 200)
        // The push goes out after the answer: wait for the server to record FCM's UNREGISTERED.
        var reason: String?
        for _ in 0..<100 {
            reason = try Self.rows(app).first?.disabledReason
            if reason != nil { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(reason == "UNREGISTERED")
        // Still ON on the phone until it asks; the next return to the foreground asks.
        #expect(app.settings.isPushEnabled)
        #expect(await app.settings.recheck() == .turnedOff(.serverDisabled))
        #expect(!app.settings.isPushEnabled && app.settings.offReason == .serverDisabled)
        #expect(app.store.values[PushTokenLifecycle.StateKey.registeredToken] == nil)
        // A disabled device: turning it on again registers (FCM has issued a new token meanwhile).
        app.tokenSource.token = makeDeviceToken()
        await app.settings.setPushEnabled(true)
        #expect(app.settings.isPushEnabled && app.settings.offReason == nil)
        #expect(try Self.rows(app).map(\.isEnabled) == [false, true])
    }

    @Test("another account registered this phone → OFF, saying so")
    func otherAccount() async throws {
        let server = try RunnerServer.forClient()
        let app = await CaregiverApp.enabled(baseURL: server.baseURL)
        let other = CaregiverApp(baseURL: server.baseURL, token: app.tokenSource.token)
        await other.settings.setPushEnabled(true)
        #expect(await app.settings.recheck() == .turnedOff(.otherAccount))
        #expect(!app.settings.isPushEnabled && app.settings.offReason == .otherAccount)
    }

    @Test(
        "the server has no record of the phone (restored database) → registered again; a re-check sends no register"
    )
    func serverLostTheRow() async throws {
        let server = try RunnerServer.forClient()
        let app = await CaregiverApp.enabled(baseURL: server.baseURL)
        let seen = try Self.rows(app).first?.lastSeenAt
        #expect(await app.settings.recheck() == .unchanged)
        #expect(try Self.rows(app).first?.lastSeenAt == seen)
        try TestDatabase.with { try $0.query("DELETE FROM push_devices WHERE owner_id = '\(app.caregiver)'") }
        #expect(await app.settings.recheck() == .reregistered)
        #expect(try Self.rows(app).map(\.isEnabled) == [true])
    }

    @Test("the server unreachable during a re-check → push stays as it was, with the retry state")
    func unreachable() async throws {
        let server = try RunnerServer.forClient()
        let app = await CaregiverApp.enabled(baseURL: server.baseURL)
        let down = try PushTokenLifecycleTests.serverWithoutDatabase()
        let offline = app.relaunched(baseURL: down.baseURL)
        #expect(await offline.settings.recheck() == .failed(.retry))
        #expect(offline.settings.isPushEnabled)
    }
}

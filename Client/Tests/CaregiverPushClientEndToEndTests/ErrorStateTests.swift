import CaregiverPushClient
import CaregiverPushClientTestSupport
import Foundation
import Testing

/// Typed error states the screen acts on, each mapped from what the real runner answers (its problem `type`).
@MainActor
@Suite("kit: error states from the server's answers", .timeLimit(.minutes(2)))
struct ErrorStateTests {
    static func api(_ url: URL, bearer: String?) -> PushAPIClient {
        PushAPIClient(baseURL: url) {
            guard let bearer else { throw CocoaError(.userCancelled) }
            return bearer
        }
    }

    static func state(_ call: () async throws(PushAPIError) -> Void) async -> CaregiverPushErrorState? {
        do {
            try await call()
            return nil
        } catch {
            return error.errorState
        }
    }

    @Test("401 (an expired token) → sign in again")
    func unauthorized() async throws {
        let server = try RunnerServer.forClient()
        let api = Self.api(server.baseURL, bearer: try caregiverToken(UUID(), expiresIn: -600))
        let state = await Self.state { () async throws(PushAPIError) in
            try await api.unregister(token: makeDeviceToken())
        }
        #expect(state == .signInRequired && state?.action == .signIn)
    }

    @Test("a patient's session on a caregiver endpoint (403 /problems/forbidden) → sign in again")
    func patientBearer() async throws {
        let server = try RunnerServer.forClient()
        let session = try TestDatabase.with { database in
            try Seed.session(database, patient: try Seed.patient(database))
        }
        let api = Self.api(server.baseURL, bearer: session)
        let state = await Self.state { () async throws(PushAPIError) in
            try await api.unregister(token: makeDeviceToken())
        }
        #expect(state == .signInRequired)
    }

    @Test("422 /problems/validation → a bug report, carrying the problem type")
    func validation() async throws {
        let server = try RunnerServer.forClient()
        let app = CaregiverApp(baseURL: server.baseURL, token: "not a token/with spaces")
        await app.settings.setPushEnabled(true)
        #expect(app.settings.errorState == .reportBug(problemType: "/problems/validation"))
        #expect(app.settings.errorState?.action == .reportBug && !app.settings.isPushEnabled)
    }

    @Test(
        "503 /problems/unavailable and no network → retry; a wrong base path (404 /problems/not-found) → a bug report"
    )
    func retryAndNotFound() async throws {
        let down = try PushTokenLifecycleTests.serverWithoutDatabase()
        let unavailable = Self.api(down.baseURL, bearer: try caregiverToken(UUID()))
        #expect(
            await Self.state { () async throws(PushAPIError) in try await unavailable.unregister(token: "t") }
                == .retry
        )
        let closed = try SilentListener()
        closed.close()
        let offline = Self.api(closed.url, bearer: "x")
        #expect(
            await Self.state { () async throws(PushAPIError) in try await offline.unregister(token: "t") } == .retry
        )
        let server = try RunnerServer.forClient()
        let wrong = Self.api(server.baseURL.appendingPathComponent("v2"), bearer: try caregiverToken(UUID()))
        #expect(
            await Self.state { () async throws(PushAPIError) in try await wrong.unregister(token: "t") }
                == .reportBug(problemType: "/problems/not-found"))
    }
}

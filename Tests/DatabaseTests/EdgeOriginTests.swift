import CaregiverPush
import Foundation
import Libpq
import Testing
import TestFixtures
import TestSupport

/// Behind the edge (docs/deploy.md#the-edge): CloudFront adds `x-origin-verify` to every request it forwards, and an
/// HTTP function configured with its value refuses a request without it, before it reads a token or a body, so the
/// HTTP API's own URL does not lead around the edge's per-client limits.
@Suite("requests only through the edge")
struct EdgeOriginTests {
    let secret = "edge-" + String(repeating: "0123456789", count: 4)
    let body = json(["token": .string("edge-token"), "platform": .string("ios"), "environment": .string("DEV")])

    func devices(of caregiver: UUID) throws -> Int {
        try TestDatabase.with { connection in
            try connection.query("SELECT count(*) FROM caregiver_push.push_devices WHERE owner_id = \(caregiver)")[
                0
            ]
            .decode(Int.self, at: 0)
        }
    }

    @Test("without the edge's header, or with another value: 403 before anything is done; with it: served")
    func onlyThroughTheEdge() throws {
        let environment = testEnvironment(["EDGE_ORIGIN_SECRET": secret])
        let caregiver = UUID()
        let token = try caregiverToken(caregiver)
        for headers in [[:], ["x-origin-verify": "wrong"], ["x-origin-verify": secret + "x"], ["X-Origin-Verify": ""]] {
            let refused = invoke(
                PushRegister(), event: makeEvent(bearer: token, body: body, extraHeaders: headers),
                environment: environment)
            #expect(refused.status == 403, "\(headers.keys)")
            #expect(refused.json?["type"] == .string("/problems/forbidden"))
            #expect(refused.log.contains(#""auth.reason":"notThroughEdge""#))
            #expect(!refused.log.contains(secret) && !refused.response.body.contains(secret))
        }
        // Not even a token is looked at first.
        let anonymous = invoke(PushRegister(), event: makeEvent(bearer: nil, body: body), environment: environment)
        #expect(anonymous.status == 403)
        #expect(try devices(of: caregiver) == 0)
        let served = invoke(
            PushRegister(), event: makeEvent(bearer: token, body: body, extraHeaders: ["X-Origin-Verify": secret]),
            environment: environment)
        #expect(served.status == 200)
        #expect(try devices(of: caregiver) == 1)
    }

    @Test("an edge secret that is set but too short fails closed (500, named), never leaves the check off")
    func shortSecretFailsClosed() throws {
        let result = invoke(
            PushRegister(), event: makeEvent(bearer: try caregiverToken(UUID()), body: body),
            environment: testEnvironment(["EDGE_ORIGIN_SECRET": "short"]))
        #expect(result.status == 500)
        #expect(result.log.contains(#""config.variable":"EDGE_ORIGIN_SECRET""#))
    }

    @Test("without an edge secret configured, no header is needed (the runner, Knative, the edge turned off)")
    func noEdgeConfigured() throws {
        let result = invoke(PushRegister(), event: makeEvent(bearer: try caregiverToken(UUID()), body: body))
        #expect(result.status == 200)
    }
}

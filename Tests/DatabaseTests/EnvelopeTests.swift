import FunctionRuntime
import CaregiverPush
import Foundation
import Testing
import TestFixtures
import TestSupport

/// The function envelope: auth, body checks, problem responses, configuration and database failures
/// (docs/behaviour.md#contract, docs/behaviour.md#contract-checks, docs/behaviour.md#problems, docs/behaviour.md#auth).
@Suite("function envelope")
struct EnvelopeTests {
    let validBody = json(["token": .string("tok"), "platform": .string("ios"), "environment": .string("DEV")])

    func expectProblem(
        _ result: Invocation, status: Int, type: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(result.status == status, sourceLocation: sourceLocation)
        #expect(result.response.headers["content-type"] == "application/problem+json", sourceLocation: sourceLocation)
        #expect(result.json?["status"] == .number(Double(status)), sourceLocation: sourceLocation)
        #expect(result.json?["type"] == .string(type), sourceLocation: sourceLocation)
        #expect(result.json?["title"]?.stringValue?.isEmpty == false, sourceLocation: sourceLocation)
        #expect(result.json?["detail"]?.stringValue?.isEmpty == false, sourceLocation: sourceLocation)
    }

    @Test(
        "a missing or unusable Authorization header is 401 with WWW-Authenticate: Bearer",
        arguments: [nil, "", "Basic dXNlcjpwYXNz", "Bearer", "Bearer not-a-jwt", "Bearer a.b.c", "Bearer pst_short"]
    )
    func unauthorized(header: String?) {
        var headers: [String: String] = [:]
        if let header { headers["authorization"] = header }
        let result = invoke(PushRegister(), event: makeEvent(bearer: nil, body: validBody, extraHeaders: headers))
        expectProblem(result, status: 401, type: "/problems/unauthorized")
        #expect(result.response.headers["www-authenticate"] == "Bearer")
    }

    @Test("an expired caregiver token, or one signed with another secret, is 401")
    func rejectedCaregiverTokens() throws {
        for token in [
            try caregiverToken(UUID(), expiresIn: -120), try caregiverToken(UUID(), secret: "another-secret"),
        ] {
            let result = invoke(PushRegister(), event: makeEvent(bearer: token, body: validBody))
            expectProblem(result, status: 401, type: "/problems/unauthorized")
            #expect(!result.log.contains(token))
        }
    }

    @Test("a valid patient session on a caregiver endpoint is 403; a revoked or expired one is 401")
    func patientTokens() throws {
        let (valid, revoked, expired) = try TestDatabase.with { connection in
            let patient = try Seed.patient(connection)
            return (
                try Seed.session(connection, patient: patient),
                try Seed.session(connection, patient: patient, revoked: true),
                try Seed.session(connection, patient: patient, expiresIn: -60)
            )
        }
        for endpoint in [PushRegister() as any Endpoint, PushUnregister()] {
            let forbidden = invoke(endpoint, event: makeEvent(bearer: valid, body: validBody))
            expectProblem(forbidden, status: 403, type: "/problems/forbidden")
            for token in [revoked, expired] {
                expectProblem(
                    invoke(endpoint, event: makeEvent(bearer: token, body: validBody)), status: 401,
                    type: "/problems/unauthorized")
            }
        }
    }

    @Test(
        "a recording endpoint reads a patient's session before the body: 401 for a revoked, expired or unknown one, whatever the body; a valid one gets the body's own 415, 400 or 422; nothing recorded"
    )
    func recordingPatientSessionFirst() throws {
        let (patient, valid, revoked, expired) = try TestDatabase.with { connection in
            let patient = try Seed.patient(connection)
            return (
                patient, try Seed.session(connection, patient: patient),
                try Seed.session(connection, patient: patient, revoked: true),
                try Seed.session(connection, patient: patient, expiresIn: -60)
            )
        }
        let unknown = try PatientSessionToken.generate().text
        // A content type that is not JSON, a body that is not, and one whose fields are all missing.
        let bodies: [(body: String, contentType: String, status: Int, type: String)] = [
            ("{}", "text/plain", 415, "/problems/unsupported-media-type"),
            ("{\"medicationId\": ", "application/json", 400, "/problems/bad-request"),
            ("{}", "application/json", 422, "/problems/validation"),
        ]
        for endpoint in [DoseRecord() as any Endpoint, SlotBulkRecord(), PrnRecord()] {
            for bad in bodies {
                for token in [revoked, expired, unknown] {
                    expectProblem(
                        invoke(endpoint, event: makeEvent(bearer: token, body: bad.body, contentType: bad.contentType)),
                        status: 401, type: "/problems/unauthorized")
                }
                expectProblem(
                    invoke(endpoint, event: makeEvent(bearer: valid, body: bad.body, contentType: bad.contentType)),
                    status: bad.status, type: bad.type)
            }
        }
        let recorded = try TestDatabase.with { connection in
            try connection.query(
                """
                SELECT (SELECT count(*) FROM dose_records WHERE patient_id = \(patient))
                     + (SELECT count(*) FROM prn_dose_records WHERE patient_id = \(patient))
                """
            ).single?.decode(Int.self)
        }
        #expect(recorded == 0)
    }

    @Test(
        "malformed JSON, a non-object body, duplicate members and an empty body are 400",
        arguments: ["{\"token\": ", "[1,2]", "\"text\"", "{\"token\":\"a\",\"token\":\"b\"}", "", "{} {}"]
    )
    func badRequest(body: String) throws {
        let result = invoke(PushRegister(), event: makeEvent(bearer: try caregiverToken(UUID()), body: body))
        expectProblem(result, status: 400, type: "/problems/bad-request")
    }

    @Test(
        "a body that is not declared JSON is 415", arguments: [nil, "text/plain", "application/x-www-form-urlencoded"])
    func unsupportedMediaType(contentType: String?) throws {
        let result = invoke(
            PushRegister(),
            event: makeEvent(bearer: try caregiverToken(UUID()), body: validBody, contentType: contentType))
        expectProblem(result, status: 415, type: "/problems/unsupported-media-type")
    }

    @Test("application/json with a charset parameter is accepted")
    func contentTypeWithParameters() throws {
        let body = json([
            "token": .string(makeDeviceToken()), "platform": .string("ios"), "environment": .string("DEV"),
        ])
        let result = invoke(
            PushRegister(),
            event: makeEvent(
                bearer: try caregiverToken(UUID()), body: body, contentType: "Application/JSON; charset=utf-8"))
        #expect(result.status == 200)
    }

    @Test("a body over 16 KiB is 413 and changes nothing, also when base64-encoded")
    func payloadTooLarge() throws {
        let token = makeDeviceToken()
        let body = json([
            "token": .string(token), "platform": .string("ios"), "environment": .string("DEV"),
            "padding": .string(String(repeating: "p", count: 16 * 1024)),
        ])
        for base64 in [false, true] {
            let result = invoke(
                PushRegister(), event: makeEvent(bearer: try caregiverToken(UUID()), body: body, base64: base64))
            expectProblem(result, status: 413, type: "/problems/payload-too-large")
        }
        #expect(try TestDatabase.with { try Seed.devices($0, token: token) }.isEmpty)
    }

    @Test("a base64-encoded body is decoded before it is read")
    func base64Body() throws {
        let token = makeDeviceToken()
        let body = json(["token": .string(token), "platform": .string("ios"), "environment": .string("DEV")])
        let result = invoke(
            PushRegister(), event: makeEvent(bearer: try caregiverToken(UUID()), body: body, base64: true))
        #expect(result.status == 200)
        #expect(try TestDatabase.with { try Seed.devices($0, token: token) }.count == 1)
    }

    @Test("a body flagged base64 that is not base64 is 400")
    func invalidBase64() throws {
        var event = try JSONDecoder().decode(
            APIGatewayV2Request.self, from: makeEvent(bearer: try caregiverToken(UUID()), body: validBody))
        event.body = "***not base64***"
        event.isBase64Encoded = true
        let result = invoke(PushRegister(), event: try JSONEncoder().encode(event))
        expectProblem(result, status: 400, type: "/problems/bad-request")
    }

    @Test("another HTTP method is 405 with Allow")
    func methodNotAllowed() throws {
        let result = invoke(
            PushRegister(), event: makeEvent(bearer: try caregiverToken(UUID()), body: validBody, method: "GET"))
        expectProblem(result, status: 405, type: "/problems/method-not-allowed")
        #expect(result.response.headers["allow"] == "POST")
    }

    @Test("an invocation event that is not an API Gateway event is a 400 problem", arguments: ["", "not json", "[]"])
    func notAnEvent(raw: String) {
        let result = invoke(PushRegister(), event: Data(raw.utf8))
        expectProblem(result, status: 400, type: "/problems/bad-request")
    }

    @Test("the request id is taken from the event and echoed in x-request-id")
    func requestIDRoundTrip() throws {
        var event = try JSONDecoder().decode(
            APIGatewayV2Request.self, from: makeEvent(bearer: nil, body: validBody))
        event.requestContext?.requestId = "req-12345"
        let result = invoke(PushRegister(), event: try JSONEncoder().encode(event))
        #expect(result.response.headers["x-request-id"] == "req-12345")
        #expect(result.log.contains("\"requestId\":\"req-12345\""))
    }

    @Test("a missing DATABASE_URL or auth secret is a 500 problem and a log line naming the variable")
    func missingConfiguration() throws {
        let token = try caregiverToken(UUID())
        for variable in ["DATABASE_URL", "SUPABASE_JWT_SECRET"] {
            let result = invoke(
                PushRegister(), event: makeEvent(bearer: token, body: validBody),
                environment: testEnvironment([variable: nil]))
            expectProblem(result, status: 500, type: "/problems/internal")
            #expect(result.log.contains("\"config.variable\":\"\(variable)\""))
            #expect(!result.response.body.contains(variable))
        }
    }

    @Test("an unreachable database is 503 with Retry-After, and the URL is not in the response")
    func databaseUnavailable() throws {
        let unreachable = "postgresql://postgres:hunter2@127.0.0.1:1/caregiver_push?connect_timeout=2"
        let result = invoke(
            PushRegister(),
            event: makeEvent(
                bearer: try caregiverToken(UUID()),
                body: json(["token": .string("t"), "platform": .string("ios"), "environment": .string("DEV")])),
            environment: testEnvironment(["DATABASE_URL": unreachable]))
        expectProblem(result, status: 503, type: "/problems/unavailable")
        #expect(result.response.headers["retry-after"] == "5")
        #expect(!result.response.body.contains("hunter2"))
        #expect(!result.log.contains("hunter2"))
        #expect(result.log.contains("database unavailable"))
    }

    @Test(
        "an unreachable database is 503 with Retry-After for a patient's recording on every recording endpoint, with neither the URL nor the token in the response or the log"
    )
    func databaseUnavailableForPatientRecording() throws {
        let unreachable = "postgresql://postgres:hunter2@127.0.0.1:1/caregiver_push?connect_timeout=2"
        let token = try PatientSessionToken.generate().text
        let body = json([
            "medicationId": .string(UUID().uuidString.lowercased()), "scheduledAt": .string("2026-11-20T23:00:00Z"),
            "date": .string("2026-11-20"), "slot": .string("morning"),
        ])
        for endpoint in [DoseRecord() as any Endpoint, SlotBulkRecord(), PrnRecord()] {
            let result = invoke(
                endpoint, event: makeEvent(bearer: token, body: body),
                environment: testEnvironment(["DATABASE_URL": unreachable]))
            expectProblem(result, status: 503, type: "/problems/unavailable")
            #expect(result.response.headers["retry-after"] == "5")
            for secret in ["hunter2", token] {
                #expect(!result.response.body.contains(secret))
                #expect(!result.log.contains(secret))
            }
            #expect(result.log.contains("database unavailable"))
        }
    }

    @Test("no response or log line carries the device token, the JWT or the session token")
    func nothingSecretLeaks() throws {
        let caregiver = UUID()
        let jwt = try caregiverToken(caregiver)
        let deviceToken = makeDeviceToken()
        let session = try TestDatabase.with { try Seed.session($0, patient: try Seed.patient($0)) }
        let body = json(["token": .string(deviceToken), "platform": .string("ios"), "environment": .string("DEV")])
        let invocations = [
            invoke(PushRegister(), event: makeEvent(bearer: jwt, body: body)),
            invoke(PushUnregister(), event: makeEvent(bearer: jwt, body: body)),
            invoke(PushRegister(), event: makeEvent(bearer: session, body: body)),
            invoke(PushRegister(), event: makeEvent(bearer: jwt + "x", body: body)),
            invoke(PushRegister(), event: makeEvent(bearer: jwt, body: body, contentType: "text/plain")),
        ]
        #expect(invocations.map(\.status) == [200, 200, 403, 401, 415])
        for invocation in invocations {
            for secret in [jwt, deviceToken, session, testJWTSecret] {
                #expect(!invocation.log.contains(secret))
                #expect(!invocation.response.body.contains(secret))
            }
        }
        #expect(invocations[0].log.contains("push.token_hash"))
    }
}

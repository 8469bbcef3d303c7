import FunctionRuntime
import CaregiverPush
import Foundation
import Testing
import TestFixtures
import TestSupport

/// An endpoint answers once through its writer, then goes on (docs/behaviour.md#contract-one-shot): what it throws
/// before answering is the problem response, what it throws after is only logged, and a recording sends its push only
/// once the caller has its answer. (An endpoint that returns without answering does not compile: `handle` returns
/// the writer's `Responded`, which nothing else can make.)
@Suite("respond, then continue")
struct RespondThenContinueTests {
    struct Answer: Encodable, Sendable {
        let answer: Int
    }

    /// Answers, then fails.
    struct FailsAfterAnswering: Endpoint {
        static let function = FunctionName.pushRegister
        let method = "POST"

        func handle(
            _ request: FunctionRequest, context: InvocationContext, writer: EndpointWriter<Answer>
        ) throws -> Responded {
            _ = try writer.respond(Answer(answer: 1))
            throw Problem.notFound("Too late to say so.")
        }
    }

    /// Answers twice.
    struct AnswersTwice: Endpoint {
        static let function = FunctionName.pushRegister
        let method = "POST"

        func handle(
            _ request: FunctionRequest, context: InvocationContext, writer: EndpointWriter<Answer>
        ) throws -> Responded {
            _ = try writer.respond(Answer(answer: 1))
            return try writer.respond(Answer(answer: 2))
        }
    }

    static let event = makeEvent(bearer: nil, body: "{}")

    @Test("an error thrown after the answer is logged, and the answer stands")
    func failureAfterAnswer() throws {
        let result = try invokeInProcess(FailsAfterAnswering(), event: Self.event)
        #expect(result.status == 200)
        #expect(result.json?["answer"] == .number(1))
        #expect(result.log.contains("request failed after its response"))
    }

    @Test("a second answer is dropped and logged; the caller gets the first")
    func secondAnswer() throws {
        let result = try invokeInProcess(AnswersTwice(), event: Self.event)
        #expect(result.status == 200)
        #expect(result.json?["answer"] == .number(1))
        #expect(result.log.contains("a second response was dropped"))
    }

    @Test("dose-record answers before it sends: at its answer the push is queued and unsent; when it returns, sent")
    func answerBeforePush() throws {
        let fake = try FCMFake()
        let fixture = try DoseRecordTests.fixture()
        let token = makeDeviceToken()
        try TestDatabase.with { try Seed.registerDevice(token, caregiver: fixture.caregiver, connection: $0) }
        func statuses() throws -> [String] {
            try TestDatabase.with { connection in
                try connection.query(
                    """
                    SELECT d.status FROM push_deliveries d JOIN push_events e USING (event_key)
                    WHERE e.patient_id = \(fixture.patient)
                    """
                ).map { try $0.decode(String.self, at: 0) }
            }
        }
        var (atAnswer, sentAtAnswer): ([String], Int) = ([], -1)
        let result = try invokeInProcess(
            DoseRecord(),
            event: makeEvent(
                path: "/api/dose-records", bearer: fixture.patientToken, body: json(DoseRecordTests.body(fixture))),
            environment: fake.environment(),
            inspect: { _ in
                atAnswer = try statuses()
                sentAtAnswer = try fake.messages(to: [token]).count
            })
        #expect(result.status == 200)
        // Queued leased to the recording's own sender (its transaction wrote it so), and not yet sent.
        #expect(atAnswer == ["SENDING"])
        #expect(sentAtAnswer == 0)
        #expect(try statuses() == ["SENT"])
        #expect(try fake.messages(to: [token]).count == 1)
    }
}

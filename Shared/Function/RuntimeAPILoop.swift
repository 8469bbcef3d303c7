import Foundation
import Logging

/// The AWS Lambda Runtime API client: the same binary as an AWS Lambda custom runtime (`provided.al2023`) and as a
/// warm worker of `runner serve --mode warm` (SPEC §2.2).
///
/// `GET /2018-06-01/runtime/invocation/next` → handle → `POST …/invocation/{id}/response` → post-response work →
/// next. The database connection and the FCM access token live in the process and serve every invocation.
struct RuntimeAPILoop<E: Endpoint> {
    let handler: FunctionHandler<E>
    let database: DatabaseSession
    let push: PushResources
    /// `host:port` from `AWS_LAMBDA_RUNTIME_API`.
    let api: String

    private var base: String { "http://\(api)/2018-06-01/runtime" }

    /// Runs until the Runtime API goes away; returns the exit status.
    func run() -> Int32 {
        var failures = 0
        while true {
            switch nextInvocation() {
            case .success(let invocation):
                failures = 0
                handle(invocation)
            case .failure(let error):
                failures += 1
                handler.logger.error("runtime API unreachable", metadata: ["error": .string(error.description)])
                // The host has gone (the runner stopped, the sandbox is shutting down): leave quietly.
                if failures >= 3 { return 1 }
                Thread.sleep(forTimeInterval: 0.2 * Double(failures))
            }
        }
    }

    struct Invocation {
        let requestID: String
        let deadline: Date?
        let event: [UInt8]
    }

    private func nextInvocation() -> Result<Invocation, HTTPClientError> {
        // The host answers when it has an event: wait as long as it takes.
        let result = HTTPClient.perform(HTTPRequest(url: "\(base)/invocation/next"), timeoutMilliseconds: 86_400_000)
        return result.flatMap { response in
            guard response.status == 200, let requestID = response.headers["lambda-runtime-aws-request-id"],
                !requestID.isEmpty
            else { return .failure(HTTPClientError(.transferFailed)) }
            let deadline = response.headers["lambda-runtime-deadline-ms"].flatMap(Double.init).map {
                Date(timeIntervalSince1970: $0 / 1000)
            }
            return .success(Invocation(requestID: requestID, deadline: deadline, event: response.body))
        }
    }

    private func handle(_ invocation: Invocation) {
        let outcome = handler.invoke(
            eventBytes: invocation.event, database: database, push: push, requestIDFallback: invocation.requestID)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let path = "\(base)/invocation/\(invocation.requestID.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? "")"
        guard let body = try? encoder.encode(outcome.response) else {
            post("\(path)/error", body: Self.errorBody(type: "Runtime.SerializationError", message: "response not encodable"))
            return
        }
        post("\(path)/response", body: Array(body))
        outcome.afterResponse?()
    }

    private func post(_ url: String, body: [UInt8]) {
        let request = HTTPRequest(method: "POST", url: url, headers: [("Content-Type", "application/json")], body: body)
        if case .failure(let error) = HTTPClient.perform(request, timeoutMilliseconds: 10_000) {
            handler.logger.error("runtime API refused the result", metadata: ["error": .string(error.description)])
        }
    }

    /// The Runtime API's error document.
    static func errorBody(type: String, message: String) -> [UInt8] {
        Array(#"{"errorMessage":"\#(message)","errorType":"\#(type)","stackTrace":[]}"#.utf8)
    }
}

import Codecs
import Curl
import FoundationEssentials
import Logging

/// The AWS Lambda Runtime API client: the same binary as an AWS Lambda custom runtime (`provided.al2023`) and as a
/// warm worker of `runner serve --mode warm` (docs/behaviour.md#contract-runtime-api).
///
/// `GET /2018-06-01/runtime/invocation/next` → handle → `POST …/invocation/{id}/response` → post-response work →
/// metrics line → next. The post-response work is bounded by the invocation's `Lambda-Runtime-Deadline-Ms` (less a
/// margin), so the process is back at `/next` before AWS's deadline: past it the environment would be stopped
/// mid-work. The database connection, the FCM client and the access token live in the process and serve every
/// invocation.
struct RuntimeAPILoop<H: InvocationHandling> {
    var handler: H
    /// The application's resources, made once for the process and handed to every invocation.
    var resources: H.Resources
    /// `host:port` from `AWS_LAMBDA_RUNTIME_API`.
    let api: String
    /// Asked after each invocation, with its deadline: a new handler and resources for the next one when what they
    /// were made from has changed. Off the request path: the caller has its answer by then.
    var renew: ((ContinuousClock.Instant?) -> (H, H.Resources)?)? = nil
    /// Asked before each invocation: a new handler and resources when the ones in hand must not serve it (a secret
    /// past its grace, read again now or dropped). Cheap when nothing is wrong: a clock read.
    var prepare: (() -> (H, H.Resources)?)? = nil

    private var base: String { "http://\(api)/2018-06-01/runtime" }

    /// Runs until the Runtime API goes away; returns the exit status.
    ///
    /// One client, so one keep-alive connection to the host for every `next` and every result, as a C runtime
    /// keeps it: no connect, no socket set-up per invocation.
    mutating func run() -> Int32 {
        let client: CurlClient
        do {
            client = try CurlClient(maxConnectionsPerHost: 1)
        } catch {
            handler.logger.error("runtime API unreachable", metadata: ["error": .string(error.description)])
            return 1
        }
        var failures = 0
        var coldStart = true
        while true {
            switch nextInvocation(client) {
            case .success(let invocation):
                failures = 0
                if let (preparedHandler, preparedResources) = prepare?() {
                    handler.release(resources)
                    (handler, resources) = (preparedHandler, preparedResources)
                }
                handle(invocation, coldStart: coldStart, client: client)
                coldStart = false
                if let (renewedHandler, renewedResources) = renew?(invocation.deadline) {
                    handler.release(resources)
                    (handler, resources) = (renewedHandler, renewedResources)
                }
            case .failure(let error):
                failures += 1
                handler.logger.error("runtime API unreachable", metadata: ["error": .string(error.description)])
                // The host has gone (the runner stopped, the sandbox is shutting down): leave quietly.
                if failures >= 3 { return 1 }
                ThreadSleep.sleep(for: .milliseconds(200 * failures))
            }
        }
    }

    struct Invocation {
        let requestID: String
        /// `Lambda-Runtime-Deadline-Ms` on this process's clock.
        let deadline: ContinuousClock.Instant?
        let event: [UInt8]
        /// The event was larger than ``FunctionHost/eventLimit``: it was read and dropped, and is answered 413.
        let tooLarge: Bool
    }

    private func nextInvocation(_ client: CurlClient) -> Result<Invocation, CurlError> {
        // The host answers when it has an event: wait as long as it takes. An event up to Lambda's own limit is
        // read; a larger one is read to its end and dropped (its request id is still needed to answer it), never
        // counted as the host going away.
        var request = CurlRequest(url: "\(base)/invocation/next", responseBodyLimit: FunctionHost.eventLimit)
        request.discardsOversizedBody = true
        let result = client.perform(request, timeoutMilliseconds: 86_400_000)
        return result.flatMap { response in
            guard response.status == 200, let requestID = response.headers["lambda-runtime-aws-request-id"],
                !requestID.isEmpty
            else { return .failure(CurlError(.transferFailed)) }
            let deadline = response.headers["lambda-runtime-deadline-ms"].flatMap {
                Self.deadline(epochMilliseconds: $0)
            }
            return .success(
                Invocation(
                    requestID: requestID, deadline: deadline, event: response.body,
                    tooLarge: response.bodyExceededLimit))
        }
    }

    /// The wall-clock deadline (Unix epoch milliseconds) as an instant of the monotonic clock.
    static func deadline(epochMilliseconds text: String, now: Date = Date()) -> ContinuousClock.Instant? {
        guard let milliseconds = Int64(text.trimmingOptionalWhitespace()), milliseconds > 0 else { return nil }
        let remaining = Double(milliseconds) / 1000 - now.timeIntervalSince1970
        return ContinuousClock.now + .milliseconds(Int64((remaining * 1000).rounded(.down)))
    }

    /// Hands the event to the handler with a way to respond — `POST …/response` — after which the handler does its
    /// post-response work; a response that cannot be encoded is reported to `…/error` instead, and so is a handler
    /// that returned without responding.
    private func handle(_ invocation: Invocation, coldStart: Bool, client: CurlClient) {
        let started = ContinuousClock.now
        let metrics = InvocationMetrics()
        metrics.set(.coldStart, coldStart ? 1 : 0)
        let path = "\(base)/invocation/\(invocation.requestID.percentEncoded)"
        var responded = false
        let respond = { (document: H.Document) throws in
            guard !responded else {
                handler.logger.error("a second response was dropped")
                return
            }
            responded = true
            guard let body = JSONCoding.encode(document) else {
                post(
                    "\(path)/error",
                    body: Self.errorBody(type: "Runtime.SerializationError", message: "response not encodable"),
                    client: client)
                throw ResponseNotDelivered()
            }
            post("\(path)/response", body: body, client: client)
        }
        if invocation.tooLarge {
            try? respond(handler.oversizedEvent(limit: FunctionHost.eventLimit))
        } else {
            handler.handle(
                InvocationInput(
                    eventBytes: invocation.event, requestIDFallback: invocation.requestID,
                    deadline: invocation.deadline, metrics: metrics),
                resources: resources, respond: respond)
        }
        if !responded {
            handler.logger.critical("the handler returned without a response")
            post(
                "\(path)/error", body: Self.errorBody(type: "Runtime.NoResponse", message: "no response"),
                client: client)
        }
        FunctionHost.emitMetrics(metrics, handler: handler, started: started)
    }

    private func post(_ url: String, body: [UInt8], client: CurlClient) {
        let request = CurlRequest(method: "POST", url: url, headers: [("Content-Type", "application/json")], body: body)
        if case .failure(let error) = client.perform(request, timeoutMilliseconds: 10_000) {
            handler.logger.error("runtime API refused the result", metadata: ["error": .string(error.description)])
        }
    }

    /// The Runtime API's error document.
    static func errorBody(type: String, message: String) -> [UInt8] {
        Array(#"{"errorMessage":"\#(message)","errorType":"\#(type)","stackTrace":[]}"#.utf8)
    }
}

import Codecs
@testable import CaregiverPush
@testable import Curl

/// Stands where FCM (and the process's HTTP client) would: it answers each request as the test scripts it, after a
/// scripted delay, on a ``ManualClock`` that it moves from one request's start or end to the next. When a request
/// may start is the client's own ``StartSchedule`` — never before its due instant or during a sender pause, never
/// after its `notAfter` (`.notStarted`), nothing after the run's deadline (`.notStarted`) — without its stream cap
/// (there are no connections here); an attempt ends at its timeout (`.timedOut`), and at the run's deadline what is
/// on the wire ends `.deadlineExceeded`. So a delivery run needs no curl and no network.
final class ScriptedFCM: DeliveryTransport {
    /// What FCM does with one request.
    enum Answer {
        case response(status: Int, headers: [String: String] = [:], body: String, after: Duration = .milliseconds(50))
        /// No HTTP answer (a reset, a refused connection) after `after`.
        case failure(CurlError.Kind, curlCode: Int? = nil, after: Duration = .milliseconds(50))

        static func sent(_ name: String = "projects/p/messages/1") -> Answer {
            .response(status: 200, body: #"{"name":"\#(name)"}"#)
        }

        static func error(_ status: Int, _ code: String, fcmCode: String? = nil, retryAfter: Int? = nil) -> Answer {
            let details =
                fcmCode.map {
                    #","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#($0)"}]"#
                } ?? ""
            return .response(
                status: status, headers: retryAfter.map { ["retry-after": String($0)] } ?? [:],
                body: #"{"error":{"code":\#(status),"status":"\#(code)"\#(details)}}"#)
        }
    }

    /// A request as FCM received it.
    struct Received {
        let deviceToken: String
        let authorization: String
        /// When it started, on the clock.
        let at: ContinuousClock.Instant
        /// How many requests for this device came before it.
        let previous: Int
    }

    private struct Waiting {
        let request: CurlRequest
        let tag: Int
    }

    private struct OnTheWire {
        let endsAt: ContinuousClock.Instant
        let tag: Int
        let result: Result<CurlResponse, CurlError>
    }

    let clock: ManualClock
    private let answer: (Received) -> Answer
    private(set) var received: [Received] = []
    private var waiting = StartSchedule<Waiting>(
        streamsPerConnection: CurlClient.streamsPerConnection, maxConnectionsPerHost: 100)
    private var onTheWire: [OnTheWire] = []
    var pausedUntil: ContinuousClock.Instant? { waiting.pausedUntil }

    init(clock: ManualClock, answer: @escaping (Received) -> Answer) {
        self.clock = clock
        self.answer = answer
    }

    var outstanding: Int { waiting.count + onTheWire.count }

    /// Requests received for `deviceToken`, in order.
    func requests(to deviceToken: String) -> [Received] { received.filter { $0.deviceToken == deviceToken } }

    func throttle(until instant: ContinuousClock.Instant) {
        waiting.pause(until: instant, now: clock.now)
    }

    func schedule(
        _ request: CurlRequest, tag: Int, at due: ContinuousClock.Instant, timeoutMilliseconds: Int,
        notAfter: ContinuousClock.Instant?
    ) {
        waiting.add(
            Waiting(request: request, tag: tag), due: due, timeoutMilliseconds: timeoutMilliseconds, notAfter: notAfter)
    }

    func run(
        until deadline: ContinuousClock.Instant,
        completion: (_ tag: Int, _ result: Result<CurlResponse, CurlError>) -> Void
    ) {
        while !waiting.isEmpty || !onTheWire.isEmpty {
            if clock.now >= deadline {
                abandonAll(deadline: deadline, completion: completion)
                return
            }
            startDue(deadline: deadline, completion: completion)
            finishDone(completion: completion)
            let next = ([waiting.nextLook(deadline: deadline)] + onTheWire.map(\.endsAt)).min() ?? deadline
            clock.advance(to: min(next, deadline))
        }
    }

    private func startDue(
        deadline: ContinuousClock.Instant, completion: (Int, Result<CurlResponse, CurlError>) -> Void
    ) {
        let now = clock.now
        // What a completion schedules meanwhile waits behind what was already waiting.
        for verdict in waiting.pass(at: now, deadline: deadline) {
            guard case .start(let item, let timeoutMilliseconds, _) = verdict else {
                completion(verdict.item.tag, .failure(CurlError(.notStarted)))
                continue
            }
            let timeout = Duration.milliseconds(timeoutMilliseconds)
            let body = try? JSONValue.parse(item.request.body)
            let deviceToken = body?["message"]?["token"]?.stringValue ?? ""
            let authorization = item.request.headers.first { $0.name == "Authorization" }?.value ?? ""
            let request = Received(
                deviceToken: deviceToken, authorization: authorization, at: now,
                previous: received.count(where: { $0.deviceToken == deviceToken }))
            received.append(request)
            switch answer(request) {
            case .response(let status, let headers, let body, let after):
                onTheWire.append(
                    after > timeout
                        ? OnTheWire(endsAt: now + timeout, tag: item.tag, result: .failure(CurlError(.timedOut)))
                        : OnTheWire(
                            endsAt: now + after, tag: item.tag,
                            result: .success(CurlResponse(status: status, headers: headers, body: Array(body.utf8)))))
            case .failure(let kind, let curlCode, let after):
                onTheWire.append(
                    OnTheWire(
                        endsAt: now + min(after, timeout), tag: item.tag,
                        result: .failure(after > timeout ? CurlError(.timedOut) : CurlError(kind, curlCode: curlCode))))
            }
        }
    }

    private func finishDone(completion: (Int, Result<CurlResponse, CurlError>) -> Void) {
        while let index = onTheWire.indices.filter({ onTheWire[$0].endsAt <= clock.now }).min(by: {
            onTheWire[$0].endsAt < onTheWire[$1].endsAt
        }) {
            let done = onTheWire.remove(at: index)
            completion(done.tag, done.result)
        }
    }

    private func abandonAll(
        deadline: ContinuousClock.Instant, completion: (Int, Result<CurlResponse, CurlError>) -> Void
    ) {
        let wire = onTheWire.map(\.tag)
        let neverStarted = waiting.pass(at: clock.now, deadline: deadline).map(\.item.tag)
        onTheWire = []
        for tag in wire { completion(tag, .failure(CurlError(.deadlineExceeded))) }
        for tag in neverStarted { completion(tag, .failure(CurlError(.notStarted))) }
    }
}

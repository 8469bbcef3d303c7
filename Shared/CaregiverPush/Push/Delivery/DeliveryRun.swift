import Curl
import FoundationEssentials
import Logging
import OpenSSLCrypto

/// One sender's pass over the push queue (docs/behaviour.md#sending): it takes a lease of due deliveries — and, for
/// `push-sweep`, more leases while earlier sends are in flight — sends every leased delivery concurrently, decides
/// each one's outcome, and records each lease's outcomes as soon as its last delivery is decided.
///
/// It owns the leases it holds and the attempts in flight. A transient failure is retried with back-off (never
/// sooner than `Retry-After`) while the retry fits before its lease's deadline and the lease has attempts left;
/// otherwise the delivery goes back to `PENDING`, due after the next back-off. A 429 with `Retry-After` pauses the
/// whole sender. A refused access token (401) is minted again once per run, and every device it was refused for is
/// sent again with the new one.
///
/// What it talks to comes in through seams, so that the same decisions run against FCM and PostgreSQL in production
/// and against an in-memory FCM and queue in the unit tests: a ``DeliveryTransport`` (the process's ``CurlClient``),
/// a ``DeliveryStore`` (``DeliveryQueue``), a ``DeliveryClock`` and the access-token re-mint. Not `Sendable`: a run
/// belongs to the thread that sends.
final class DeliveryRun<Transport: DeliveryTransport, Store: DeliveryStore, Clock: DeliveryClock> {
    /// What a run is allowed to do.
    struct Settings {
        /// `…/v1/projects/{project}/messages:send`.
        var sendURL: String
        var trust: TrustStore
        /// Deliveries per lease.
        var batchSize: Int
        /// How long a lease taken while sending may send (`PUSH_SEND_DEADLINE_MS`); its row's lease is 5 s longer.
        var sendWindow: Duration
        var retry = RetryPolicy()
        /// How `push-sweep` keeps leasing while it sends; `nil`: one lease.
        var continuation: PushDispatcher.Continuation?
        /// Whether a pause FCM asked for is waited out before leasing; when not, the run leases nothing while the
        /// pause lasts and leaves the deliveries due for the sweep.
        var waitsOutPauses = true
        /// `runner check-deployment`'s topic: each message goes there with `validate_only` instead of to its device.
        var validationTopic: String? = nil
    }

    /// Mints a new access token in place of `rejected`, in time for `deadline`.
    typealias ReMint = (_ rejected: String, _ deadline: ContinuousClock.Instant) throws -> String

    /// One leased delivery's progress through its attempts of this lease.
    private struct Progress {
        var outcome: DeliveryOutcome
        let body: [UInt8]
        /// Its lease's index in ``leases``.
        let lease: Int
        /// HTTP attempts made under this lease.
        var tries = 0
        /// Whether this device has already been sent again with a re-minted access token.
        var retriedWithNewToken = false
        /// Whether this device has already been sent again at once after its connection broke.
        var retriedAfterBrokenConnection = false
        var finished = false
    }

    /// A lease this run holds: its deliveries are `progress[first..<first + count]`.
    private struct HeldLease {
        let token: UUID
        /// When this sender must be done with it (its row's lease runs out 5 s later).
        let deadline: ContinuousClock.Instant
        let first: Int
        let count: Int
        var undecided: Int
    }

    private let transport: Transport
    private let store: Store
    private let clock: Clock
    private let settings: Settings
    private let reMint: ReMint
    private let logger: Logger

    private var progress: [Progress] = []
    private var leases: [HeldLease] = []
    /// The request headers, the access token's included: built once per token, shared by every request.
    private var headers: [(name: String, value: String)]
    private var accessToken: String
    private var reMinted = false
    /// No further lease: nothing more due, the time is up, or a lease failed.
    private var exhausted: Bool
    /// With the continuation's lease spacing, after a lease that came back short: no lease before then.
    private var nextLeaseAt: ContinuousClock.Instant?
    private var report = DeliveryReport()

    init(
        transport: Transport, store: Store, clock: Clock, settings: Settings, accessToken: String, logger: Logger,
        reMint: @escaping ReMint
    ) {
        self.transport = transport
        self.store = store
        self.clock = clock
        self.settings = settings
        self.accessToken = accessToken
        self.headers = Self.headers(accessToken)
        self.logger = logger
        self.reMint = reMint
        exhausted = settings.continuation == nil
    }

    /// Leases, sends and records until every leased delivery is decided, or the time is up: `deadline` for the
    /// first lease, the continuation's run deadline for the run. A pause FCM asked for is waited out first, and
    /// nothing is leased when it outlasts `deadline`.
    /// - Returns: the counts; `moreDue` when leasing stopped for a pause rather than for want of due deliveries.
    func run(deadline: ContinuousClock.Instant) -> DeliveryReport {
        if let pausedUntil = transport.pausedUntil, pausedUntil > clock.now {
            // FCM asked this sender to pause (429 with Retry-After): lease nothing before the pause is over, and
            // nothing at all when it outlasts the deadline — the deliveries stay due for whoever comes next.
            guard settings.waitsOutPauses, pausedUntil < deadline else {
                logger.warning("push deferred: FCM asked this sender to pause")
                return DeliveryReport(skippedReason: "throttled")
            }
            clock.sleep(until: pausedUntil)
        }
        guard let first = lease(orLog: "push deferred to the sweep: deliveries could not be leased") else {
            return DeliveryReport(skippedReason: "lease")
        }
        guard !first.deliveries.isEmpty else {
            // Debug: a sweep with nothing due looks again every few hundred milliseconds.
            logger.debug("push has nothing due")
            return DeliveryReport()
        }
        hold(token: first.token, deliveries: first.deliveries, deadline: deadline)
        report.lastLeaseAt = clock.now
        if first.deliveries.count < settings.batchSize, let spacing = settings.continuation?.leaseSpacing {
            nextLeaseAt = clock.now + spacing
        }
        topUp()
        transport.run(until: settings.continuation?.runDeadline ?? deadline) { tag, result in
            complete(tag, result)
            topUp()
        }
        // Anything the transport never reported (it cannot happen, but a delivery must not stay leased for nothing).
        for index in progress.indices where !progress[index].finished {
            finish(index, .pending, error: "not attempted before the deadline")
        }
        // A run that was only waiting out its spacing has nothing more due now: its caller spaces the next lease.
        report.moreDue = !exhausted && nextLeaseAt == nil
        // Info when something was not sent; a push that all went out is in the metrics line already (PushSent).
        logger.log(
            level: report.sent == report.leased ? .debug : .info, "push dispatched",
            metadata: [
                "push.leased": .stringConvertible(report.leased), "push.sent": .stringConvertible(report.sent),
                "push.disabled": .stringConvertible(report.disabled), "push.failed": .stringConvertible(report.failed),
                "push.retry": .stringConvertible(report.retryScheduled),
            ])
        return report
    }

    // MARK: Leases

    /// Takes over a lease: every delivery gets its message and its first attempt.
    private func hold(token: UUID, deliveries: [LeasedDelivery], deadline: ContinuousClock.Instant) {
        let first = progress.count
        leases.append(
            HeldLease(
                token: token, deadline: deadline, first: first, count: deliveries.count, undecided: deliveries.count))
        progress.reserveCapacity(first + deliveries.count)
        for delivery in deliveries {
            progress.append(
                Progress(
                    outcome: DeliveryOutcome(delivery: delivery, status: .pending, attempts: delivery.attempts),
                    body: settings.validationTopic.map { delivery.message.validationJSON(topic: $0) }
                        ?? delivery.body,
                    lease: leases.count - 1))
        }
        for index in first..<progress.count { attempt(index) }
    }

    /// One batch leased, or `nil` when the store failed, logged as `failure` with the error's metadata.
    private func lease(orLog failure: Logger.Message) -> (token: UUID, deliveries: [LeasedDelivery])? {
        do {
            return try store.lease(limit: settings.batchSize)
        } catch {
            logger.error(failure, metadata: ErrorMetadata.of(error))
            return nil
        }
    }

    /// Another lease whenever at most one batch of sends is outstanding (so up to two: one on the wire, the next
    /// waiting for the pacer), none while FCM asks for a pause, none once too little time is left for one. A
    /// short lease ends the leasing, unless the continuation spaces leases: then the next comes, while sends are
    /// in flight, once the spacing has passed.
    private func topUp() {
        guard let continuation = settings.continuation else { return }
        while !exhausted, transport.outstanding <= settings.batchSize,
            (transport.pausedUntil ?? clock.now) <= clock.now
        {
            guard continuation.runDeadline - clock.now >= continuation.minimumLeaseTime else {
                exhausted = true
                return
            }
            if let nextLeaseAt, clock.now < nextLeaseAt { return }
            let deadline = min(clock.now + settings.sendWindow, continuation.runDeadline)
            guard let next = lease(orLog: "push: the next deliveries could not be leased") else {
                exhausted = true
                return
            }
            report.lastLeaseAt = clock.now
            nextLeaseAt = nil
            if next.deliveries.count < settings.batchSize {
                if let spacing = continuation.leaseSpacing {
                    nextLeaseAt = clock.now + spacing
                } else {
                    exhausted = true
                }
            }
            if !next.deliveries.isEmpty { hold(token: next.token, deliveries: next.deliveries, deadline: deadline) }
        }
    }

    /// Ends this lease's work on a delivery: final, or back to the queue after a back-off. A lease whose last
    /// delivery this was is recorded at once.
    private func finish(
        _ index: Int, _ status: DeliveryOutcome.Status, error: String? = nil, retryAfter: TimeInterval? = nil
    ) {
        guard !progress[index].finished else { return }
        progress[index].finished = true
        progress[index].outcome.status = status
        progress[index].outcome.attempts = progress[index].outcome.delivery.attempts + max(progress[index].tries - 1, 0)
        if let error { progress[index].outcome.lastError = error }
        if status == .pending {
            progress[index].outcome.retryDelayMilliseconds =
                settings.retry.backoff(afterAttempt: progress[index].outcome.attempts, retryAfter: retryAfter)
                .milliseconds
        }
        let lease = progress[index].lease
        leases[lease].undecided -= 1
        if leases[lease].undecided == 0 { recordLease(lease) }
    }

    private func recordLease(_ lease: Int) {
        let held = leases[lease]
        let outcomes = progress[held.first..<(held.first + held.count)].map(\.outcome)
        var leaseReport = DeliveryReport(leased: held.count, leases: 1)
        tally(outcomes, into: &leaseReport)
        store.record(outcomes, lease: held.token)
        report.add(leaseReport)
    }

    private func tally(_ outcomes: [DeliveryOutcome], into report: inout DeliveryReport) {
        for outcome in outcomes {
            switch outcome.status {
            case .sent: report.sent += 1
            case .disabledToken: report.disabled += 1
            case .failed: report.failed += 1
            case .pending: report.retryScheduled += 1
            }
            let level: Logger.Level = outcome.status == .sent ? .debug : .warning
            logger.log(
                level: level, "push delivery finished",
                metadata: [
                    "push.device": .string(outcome.delivery.deviceID.uuidString.lowercased()),
                    "push.token_hash": .string(SHA256.hexPrefix(of: outcome.delivery.token)),
                    "push.status": .string(outcome.status.rawValue),
                    "push.attempts": .stringConvertible(outcome.attempts),
                    "push.error": .string(outcome.lastError ?? ""),
                ])
        }
    }

    // MARK: Attempts

    private static func headers(_ accessToken: String) -> [(name: String, value: String)] {
        [("Authorization", "Bearer \(accessToken)"), ("Content-Type", "application/json; charset=UTF-8")]
    }

    /// Schedules the delivery's next attempt, at `due` or (when that is now) at the pacer's next slot, bounded by
    /// its lease's deadline.
    private func attempt(_ index: Int, at due: ContinuousClock.Instant? = nil) {
        progress[index].tries += 1
        let now = clock.now
        let due = due ?? now
        // Sends due now take the pacer's next slot; a back-off already spaces a later retry.
        let start = due <= now ? (settings.continuation?.pacer.slot(notBefore: due) ?? due) : due
        let deadline = leases[progress[index].lease].deadline
        transport.schedule(
            CurlRequest(
                method: "POST", url: settings.sendURL, headers: headers, body: progress[index].body,
                responseBodyLimit: 64 * 1024, trust: settings.trust),
            tag: index, at: start, timeoutMilliseconds: max(min(5000, (deadline - start).milliseconds), 1),
            notAfter: deadline)
    }

    /// Seconds of a sender pause still to run, for deliveries the deadline leaves waiting behind it.
    private func remainingPause() -> TimeInterval? {
        guard let until = transport.pausedUntil, until > clock.now else { return nil }
        return Double((until - clock.now).milliseconds) / 1000
    }

    /// Decides what one attempt's result means for its delivery: done, another attempt, or back to the queue.
    private func complete(_ index: Int, _ result: Result<CurlResponse, CurlError>) {
        let outcome: FCMSendOutcome
        switch result {
        case .success(let response):
            outcome = FCMSendOutcome.classify(response)
            if let pause = FCMSendOutcome.senderPause(response) {
                // Client-side throttling: nothing more goes to FCM from this process until the pause is over.
                transport.throttle(until: clock.now + .milliseconds(Int(pause * 1000)))
                logger.warning(
                    "push: FCM quota exceeded, sender paused", metadata: ["fcm.pause_ms": "\(Int(pause * 1000))"])
            }
        case .failure(let error) where error.kind == .notStarted:
            // Never sent: due again once any pause is over.
            let previous = progress[index].outcome.lastError.map { "\($0); " } ?? ""
            progress[index].tries -= 1
            finish(index, .pending, error: previous + "not sent before the deadline", retryAfter: remainingPause())
            return
        case .failure(let error) where error.kind == .deadlineExceeded:
            // It may have reached FCM: a resend carries the same collapse id, so the phone shows one.
            let previous = progress[index].outcome.lastError.map { "\($0); " } ?? ""
            finish(index, .pending, error: previous + "deadline exceeded")
            return
        case .failure(let error):
            if error.kind == .tlsVerificationFailed {
                logger.error(
                    "push: FCM certificate not trusted",
                    metadata: ["error": .string(error.description), "push.delivery_index": "\(index)"])
            }
            outcome =
                error.isTransient ? .retry(retryAfter: nil, error: error.description) : .fail(error: error.description)
            // A connection that broke under the request (a reset, a failed send on a shared HTTP/2 connection) says
            // nothing about FCM's load: the first such retry of a lease goes out at once, on a fresh connection.
            if error.isBrokenConnection, !progress[index].retriedAfterBrokenConnection {
                progress[index].retriedAfterBrokenConnection = true
                progress[index].outcome.lastError = error.description
                if progress[index].tries < settings.retry.maxAttemptsPerLease {
                    attempt(index)
                    return
                }
            }
        }
        switch outcome {
        case .sent(let name):
            progress[index].outcome.messageName = name
            // Cleared before the lease can be recorded: a SENT row keeps no error of an earlier attempt.
            progress[index].outcome.lastError = nil
            finish(index, .sent)
        case .disableDevice(let reason, let error):
            progress[index].outcome.disabledReason = reason
            finish(index, .disabledToken, error: error)
        case .fail(let error):
            finish(index, .failed, error: error)
        case .retry(let retryAfter, let error):
            progress[index].outcome.lastError = error
            let totalAttempts = progress[index].outcome.delivery.attempts + progress[index].tries - 1
            let due = clock.now + settings.retry.backoff(afterAttempt: totalAttempts, retryAfter: retryAfter)
            if progress[index].tries < settings.retry.maxAttemptsPerLease,
                due < leases[progress[index].lease].deadline
            {
                attempt(index, at: due)
            } else {
                finish(index, .pending, retryAfter: retryAfter)
            }
        case .refreshAccessToken:
            progress[index].outcome.lastError = "401 UNAUTHENTICATED"
            guard !progress[index].retriedWithNewToken else {
                finish(index, .failed)
                return
            }
            progress[index].retriedWithNewToken = true
            if !reMinted {
                // One re-mint per run: every device refused with the old token is sent again with the new one.
                reMinted = true
                do {
                    accessToken = try reMint(accessToken, leases[progress[index].lease].deadline)
                    headers = Self.headers(accessToken)
                } catch {
                    logger.error(
                        "push: access token refresh failed", metadata: ["error": .string(String(describing: error))])
                    finish(index, .pending)
                    return
                }
            }
            attempt(index)
        }
    }
}

import Codecs
import Curl
import FoundationEssentials
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension PushDispatcher {
    /// One leased delivery's progress through its attempts of this lease.
    private struct Progress {
        var outcome: DeliveryOutcome
        let body: [UInt8]
        /// HTTP attempts made under this lease.
        var tries = 0
        /// Whether this device has already been retried with a re-minted access token.
        var retriedWithNewToken = false
        var finished = false
    }

    /// Deliveries leased together, and when this sender must be done with them (its lease runs out 5 s later).
    struct Lease {
        let token: UUID
        let deliveries: [LeasedDelivery]
        let deadline: ContinuousClock.Instant
    }

    /// How a sender keeps going while it sends (`push-sweep`): it leases the next batch whenever at most one batch
    /// of its sends is outstanding, paced by `pacer`, and never while FCM has asked it to pause.
    struct Refill {
        /// Leases the next batch; `nil` when nothing more is due, the time is up, or the lease failed.
        let next: () -> Lease?
        let batchSize: Int
        let pacer: SendPacer
    }

    /// Sends every leased delivery concurrently and decides each outcome. A transient failure is retried with
    /// exponential back-off and jitter (honouring `Retry-After`) while the retry fits before its lease's deadline and
    /// the lease has attempts left; otherwise the delivery goes back to `PENDING`, due after the next back-off.
    /// With `refill`, more leases join while earlier sends are still in flight. `leaseDone` gets each lease's
    /// outcomes as soon as its last delivery is decided (on this thread).
    /// - Returns: whether deliveries may still be due (refilling stopped for a pause, not for want of work).
    @discardableResult
    func send(
        _ first: Lease, accessToken: String, provider: AccessTokenProvider, client: CurlClient,
        database: DatabaseSession, refill: Refill? = nil, until runDeadline: ContinuousClock.Instant,
        logger: Logger, leaseDone: (Lease, [DeliveryOutcome]) -> Void
    ) -> Bool {
        var deliveries: [LeasedDelivery] = []
        var progress: [Progress] = []
        var leases: [Lease] = []
        /// Per delivery, its lease's index; per lease, where its deliveries start and how many are undecided.
        var leaseOf: [Int] = []
        var leaseStart: [Int] = []
        var undecided: [Int] = []
        var exhausted = refill == nil
        let url = "\(configuration.fcmAPIBaseURL)/v1/projects/\(provider.account.projectID)/messages:send"
        var currentToken = accessToken
        var refreshedToken = false
        func request(_ index: Int) -> CurlRequest {
            CurlRequest(
                method: "POST", url: url,
                headers: [
                    ("Authorization", "Bearer \(currentToken)"), ("Content-Type", "application/json; charset=UTF-8"),
                ],
                body: progress[index].body, responseBodyLimit: 64 * 1024, trust: configuration.trustStore)
        }
        func deadline(_ index: Int) -> ContinuousClock.Instant { leases[leaseOf[index]].deadline }
        func attempt(_ index: Int, at due: ContinuousClock.Instant = .now) {
            progress[index].tries += 1
            // Sends due now take the pacer's next slot; a back-off already spaces a later retry.
            let start = due <= .now ? (refill?.pacer.slot(notBefore: due) ?? due) : due
            client.schedule(
                request(index), tag: index, at: start,
                timeoutMilliseconds: attemptTimeout(until: deadline(index), from: start), notAfter: deadline(index))
        }
        func add(_ lease: Lease) {
            leases.append(lease)
            leaseStart.append(deliveries.count)
            undecided.append(lease.deliveries.count)
            for delivery in lease.deliveries {
                deliveries.append(delivery)
                leaseOf.append(leases.count - 1)
                progress.append(
                    Progress(
                        outcome: DeliveryOutcome(delivery: delivery, status: .pending, attempts: delivery.attempts),
                        body: delivery.message.json(deviceToken: delivery.token)))
            }
            for index in leaseStart[leases.count - 1]..<deliveries.count { attempt(index) }
        }
        /// Another lease whenever at most one batch of sends is outstanding (so up to two: one on the wire, the next
        /// waiting for the pacer), none while FCM asks for a pause.
        func topUp() {
            guard let refill else { return }
            while !exhausted, client.outstanding <= refill.batchSize, (client.pausedUntil ?? .now) <= .now {
                guard let lease = refill.next() else {
                    exhausted = true
                    return
                }
                if lease.deliveries.count < refill.batchSize { exhausted = true }
                if !lease.deliveries.isEmpty { add(lease) }
            }
        }
        /// Ends this lease's work on a delivery: final, or back to the queue after a back-off.
        func finish(
            _ index: Int, _ status: DeliveryOutcome.Status, error: String? = nil, retryAfter: TimeInterval? = nil
        ) {
            guard !progress[index].finished else { return }
            progress[index].finished = true
            progress[index].outcome.status = status
            progress[index].outcome.attempts = deliveries[index].attempts + max(progress[index].tries - 1, 0)
            if let error { progress[index].outcome.lastError = error }
            if status == .pending {
                progress[index].outcome.retryDelayMilliseconds =
                    backoff(afterAttempt: progress[index].outcome.attempts, retryAfter: retryAfter).milliseconds
            }
            let lease = leaseOf[index]
            undecided[lease] -= 1
            if undecided[lease] == 0 {
                let range = leaseStart[lease]..<(leaseStart[lease] + leases[lease].deliveries.count)
                leaseDone(leases[lease], progress[range].map(\.outcome))
            }
        }
        /// Seconds of a sender pause still to run, for deliveries the deadline leaves waiting behind it.
        func remainingPause() -> TimeInterval? {
            guard let until = client.pausedUntil, until > .now else { return nil }
            return Double((until - .now).milliseconds) / 1000
        }
        add(first)
        topUp()
        client.run(until: runDeadline) { index, result in
            defer { topUp() }
            let outcome: FCMSendOutcome
            switch result {
            case .success(let response):
                outcome = FCMSendOutcome.classify(response)
                if let pause = FCMSendOutcome.senderPause(response) {
                    // Client-side throttling: nothing more goes to FCM from this process until the pause is over.
                    client.throttle(until: .now + .milliseconds(Int(pause * 1000)))
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
                    error.isTransient
                    ? .retry(retryAfter: nil, error: error.description) : .fail(error: error.description)
            }
            switch outcome {
            case .sent(let name):
                progress[index].outcome.messageName = name
                finish(index, .sent, error: nil)
                progress[index].outcome.lastError = nil
            case .disableDevice(let reason, let error):
                progress[index].outcome.disabledReason = reason
                finish(index, .disabledToken, error: error)
            case .fail(let error):
                finish(index, .failed, error: error)
            case .retry(let retryAfter, let error):
                progress[index].outcome.lastError = error
                let totalAttempts = deliveries[index].attempts + progress[index].tries - 1
                let due = ContinuousClock.now + backoff(afterAttempt: totalAttempts, retryAfter: retryAfter)
                if progress[index].tries < Self.maxAttemptsPerLease, due < deadline(index) {
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
                if !refreshedToken {
                    // One re-mint per lease: every device refused with the old token retries with the new one.
                    refreshedToken = true
                    do {
                        currentToken = try provider.accessToken(
                            connection: try database.connection(), rejected: currentToken,
                            timeoutMilliseconds: mintTimeout(until: deadline(index)), logger: logger)
                    } catch {
                        logger.error(
                            "push: access token refresh failed", metadata: ["error": .string(String(describing: error))]
                        )
                        finish(index, .pending)
                        return
                    }
                }
                attempt(index)
            }
        }
        // Anything the client never reported (it cannot happen, but a delivery must not stay leased for nothing).
        for index in progress.indices where !progress[index].finished {
            finish(index, .pending, error: "not attempted before the deadline")
        }
        return !exhausted
    }

    /// Exponential back-off with jitter ("equal jitter": half fixed, half random), never shorter than `Retry-After`,
    /// never longer than ``maxBackoff`` (unless `Retry-After` says so).
    func backoff(afterAttempt attempt: Int, retryAfter: TimeInterval?) -> Duration {
        let exponential = min(Self.baseBackoff * pow(2, Double(min(max(attempt - 1, 0), 20))), Self.maxBackoff)
        let jittered = exponential / 2 + Double.random(in: 0...(exponential / 2))
        return .milliseconds(Int(max(jittered, retryAfter ?? 0) * 1000))
    }

    /// One attempt may use up to 5 s, and never outlive the deadline.
    private func attemptTimeout(until deadline: ContinuousClock.Instant, from start: ContinuousClock.Instant) -> Int {
        max(min(5000, (deadline - start).milliseconds), 1)
    }
}

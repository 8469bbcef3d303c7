import Codecs
import Curl
import OpenSSLCrypto
import FunctionRuntime
import FoundationEssentials
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Sends what the push queue owes (docs/behaviour.md#sending): a recording's own deliveries right after its
/// response, and `push-sweep`'s batches.
///
/// 1. Gets the FCM access token first (shared in `fcm_access_tokens`), so that nothing is leased that cannot be sent.
/// 2. Leases the due deliveries (``DeliveryQueue/lease(eventKey:limit:configuration:database:)``).
/// 3. Sends them concurrently over the process's ``CurlClient``, retrying transient failures inside the deadline.
/// 4. Records each outcome; what could not be sent in time goes back to `PENDING` with a back-off, for the sweep.
///
/// Nothing is thrown: this runs after the response. Whatever goes wrong leaves deliveries `PENDING` or leased, and a
/// lease runs out: the sweep finishes the job.
public struct PushDispatcher {
    /// Attempts per device within one lease, the first included (the Admin SDKs retry 4 times).
    static let maxAttemptsPerLease = 5
    /// First back-off; doubled for each further attempt.
    static let baseBackoff: TimeInterval = 0.5
    /// The longest back-off between two leases of one delivery.
    static let maxBackoff: TimeInterval = 300

    public let configuration: Configuration
    public let logger: Logger

    public init(configuration: Configuration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// What one dispatch (or one sweep batch) did, for logs, metrics, tests and benchmarks.
    public struct Report: Equatable, Sendable {
        public var leased = 0
        public var sent = 0
        public var disabled = 0
        public var failed = 0
        /// Back to `PENDING` for a later attempt.
        public var retryScheduled = 0
        public var connectionsOpened = 0
        /// Leases taken (a sweep's run takes several while it sends).
        public var leases = 0
        /// The run stopped taking leases for a pause FCM asked for, not for want of due deliveries.
        public var moreDue = false
        public var skippedReason: String?

        mutating func add(_ other: Report) {
            leased += other.leased
            sent += other.sent
            disabled += other.disabled
            failed += other.failed
            retryScheduled += other.retryScheduled
            connectionsOpened += other.connectionsOpened
            leases += other.leases
        }

        /// Adds the push counters to an invocation's metrics.
        func record(in metrics: InvocationMetrics?) {
            metrics?.add(.pushSent, sent)
            metrics?.add(.pushFailed, failed)
            metrics?.add(.pushDisabled, disabled)
            metrics?.add(.pushRetryScheduled, retryScheduled)
        }
    }

    /// The send deadline of an invocation: `PUSH_SEND_DEADLINE_MS` from now, and never later than the host's
    /// deadline (the Lambda invocation's) minus ``hostDeadlineMargin``, so the process is back at `/next` in time.
    public func sendDeadline(hostDeadline: ContinuousClock.Instant?) -> ContinuousClock.Instant {
        let own = ContinuousClock.now + .milliseconds(configuration.pushSendDeadlineMilliseconds)
        guard let hostDeadline else { return own }
        return min(own, hostDeadline - Self.hostDeadlineMargin)
    }

    /// Time kept back from the host's deadline to record outcomes and return to the Runtime API.
    public static let hostDeadlineMargin = Duration.milliseconds(1000)

    /// Sends the deliveries `eventKey` owes (the recording's post-response work). Never throws.
    @discardableResult
    public func dispatch(
        eventKey: String, database: DatabaseSession, push: PushResources, deadline: ContinuousClock.Instant,
        metrics: InvocationMetrics? = nil
    ) -> Report {
        var log = logger
        log[metadataKey: "push.event"] = .string(DoseTakenEvent.collapseID(of: eventKey))
        let report = run(
            limit: 10_000, eventKey: eventKey, database: database, push: push, deadline: deadline, logger: log)
        report.record(in: metrics)
        return report
    }

    /// How `push-sweep` keeps one run going: more leases of `limit` while earlier sends are in flight, each with
    /// its own send deadline, none after `runDeadline` less `minimumLeaseTime`, paced by `pacer`.
    struct Continuation {
        let runDeadline: ContinuousClock.Instant
        let minimumLeaseTime: Duration
        let pacer: SendPacer
    }

    /// Lease, send, record: everything due (of `eventKey`, or of any event), at most `limit` deliveries a lease; one
    /// lease, or with `continuation` as many as come due while it sends.
    func run(
        limit: Int, eventKey: String?, database: DatabaseSession, push: PushResources,
        deadline: ContinuousClock.Instant, logger log: Logger, continuation: Continuation? = nil
    ) -> Report {
        guard configuration.pushEnvironment != nil else {
            if configuration.fcmServiceAccountBase64 != nil || configuration.fcmServiceAccountFile != nil {
                log.error(
                    "push skipped: PUSH_ENVIRONMENT is not DEV or PROD",
                    metadata: ["config.variable": "PUSH_ENVIRONMENT"])
            } else {
                PushResources.logNoServiceAccount(log)
            }
            return Report(skippedReason: "environment")
        }
        guard ContinuousClock.now < deadline else {
            log.warning("push deferred to the sweep: no time left before the deadline")
            return Report(skippedReason: "deadline")
        }
        guard let provider = push.tokenProvider(logger: log) else { return Report(skippedReason: "service account") }
        let client: CurlClient
        let accessToken: String
        do {
            client = try push.httpClient()
            accessToken = try provider.accessToken(
                connection: try database.connection(), timeoutMilliseconds: mintTimeout(until: deadline), logger: log)
        } catch {
            log.error(
                "push deferred to the sweep: no FCM access token",
                metadata: ["error": .string(String(describing: error))])
            return Report(skippedReason: "access token")
        }
        if let pausedUntil = client.pausedUntil, pausedUntil > .now {
            // FCM asked this sender to pause (429 with Retry-After): lease nothing before the pause is over, and
            // nothing at all when it outlasts the deadline — the deliveries stay due for whoever comes next.
            guard pausedUntil < deadline else {
                log.warning("push deferred: FCM asked this sender to pause past the deadline")
                return Report(skippedReason: "throttled")
            }
            ThreadSleep.sleep(until: pausedUntil)
        }
        let lease: (token: UUID, deliveries: [LeasedDelivery])
        do {
            lease = try DeliveryQueue.lease(
                eventKey: eventKey, limit: limit, configuration: configuration, database: database)
        } catch {
            log.error("push deferred to the sweep: deliveries could not be leased", metadata: ErrorMetadata.of(error))
            return Report(skippedReason: "lease")
        }
        guard !lease.deliveries.isEmpty else {
            log.info("push has nothing due")
            return Report()
        }
        let opened = client.connectionsOpened
        var report = Report()
        let refill = continuation.map { continuation in
            Refill(
                next: {
                    guard continuation.runDeadline - .now >= continuation.minimumLeaseTime else { return nil }
                    let leaseDeadline = min(sendDeadline(hostDeadline: nil), continuation.runDeadline)
                    do {
                        let next = try DeliveryQueue.lease(
                            eventKey: eventKey, limit: limit, configuration: configuration, database: database)
                        return Lease(token: next.token, deliveries: next.deliveries, deadline: leaseDeadline)
                    } catch {
                        log.error("push: the next deliveries could not be leased", metadata: ErrorMetadata.of(error))
                        return nil
                    }
                }, batchSize: limit, pacer: continuation.pacer)
        }
        report.moreDue = send(
            Lease(token: lease.token, deliveries: lease.deliveries, deadline: deadline), accessToken: accessToken,
            provider: provider, client: client, database: database, refill: refill,
            until: continuation?.runDeadline ?? deadline, logger: log
        ) { done, outcomes in
            var leaseReport = Report(leased: done.deliveries.count, leases: 1)
            tally(outcomes, into: &leaseReport, logger: log)
            DeliveryQueue.record(outcomes, lease: done.token, database: database, logger: log)
            report.add(leaseReport)
        }
        report.connectionsOpened = client.connectionsOpened - opened
        log.info(
            "push dispatched",
            metadata: [
                "push.leased": .stringConvertible(report.leased), "push.sent": .stringConvertible(report.sent),
                "push.disabled": .stringConvertible(report.disabled), "push.failed": .stringConvertible(report.failed),
                "push.retry": .stringConvertible(report.retryScheduled),
            ])
        return report
    }

    private func tally(_ outcomes: [DeliveryOutcome], into report: inout Report, logger: Logger) {
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

    /// A mint holds the shared advisory lock across its HTTP call: never longer than one statement may run, nor
    /// past the deadline.
    func mintTimeout(until deadline: ContinuousClock.Instant) -> Int {
        max(min(configuration.transactionSettings.statementTimeoutMilliseconds, (deadline - .now).milliseconds), 1)
    }
}

extension DoseTakenEvent {
    /// The APNs collapse id of an event key: the first 32 hex digits of its SHA-256 (docs/behaviour.md#payload).
    static func collapseID(of eventKey: String) -> String {
        String(Hex.encode(SHA256.hash(Array(eventKey.utf8))).prefix(32))
    }
}

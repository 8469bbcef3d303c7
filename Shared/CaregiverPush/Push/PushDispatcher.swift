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
/// 2. Hands the rest to one ``DeliveryRun`` over the process's ``CurlClient`` and ``DeliveryQueue``: it leases the due
///    deliveries, sends them concurrently and records each outcome. A recording's own send makes one attempt per
///    device: a transient failure goes back to `PENDING`, due after its back-off, for the sweep (which stays
///    running and sends it when due); the sweep retries transient failures inside its own leases.
///
/// Nothing is thrown: this runs after the response. Whatever goes wrong leaves deliveries `PENDING` or leased, and a
/// lease runs out: the sweep finishes the job.
public struct PushDispatcher {
    public let configuration: Configuration
    public let logger: Logger

    public init(configuration: Configuration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
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
    ) -> DeliveryReport {
        dispatch(eventKey: eventKey, lease: nil, database: database, push: push, deadline: deadline, metrics: metrics)
    }

    /// Sends the deliveries `eventKey` owes: those `lease` holds when the recording transaction leased them (no
    /// lease statement then), else whatever of the event is due. Leased deliveries a skipped send cannot send go
    /// back to the queue at once, due now (or when FCM's pause ends), for the sweep. Never throws.
    @discardableResult
    func dispatch(
        eventKey: String, lease: OwedPush.Lease?, database: DatabaseSession, push: PushResources,
        deadline: ContinuousClock.Instant, metrics: InvocationMetrics? = nil
    ) -> DeliveryReport {
        var log = logger
        log[metadataKey: "push.event"] = .string(DoseTakenEvent.collapseID(of: eventKey))
        let report = run(
            limit: 10_000, eventKey: eventKey, preLeased: lease, database: database, push: push, deadline: deadline,
            logger: log)
        if let reason = report.skippedReason, let lease {
            let pause = (try? push.httpClient())?.pausedUntil.map { max(($0 - .now).milliseconds, 0) } ?? 0
            DeliveryQueue.release(
                lease: lease.token, delayMilliseconds: pause, reason: "not sent: push skipped (\(reason))",
                database: database, logger: log)
        }
        report.record(in: metrics)
        return report
    }

    /// How `push-sweep` keeps one run going: more leases of `limit` while earlier sends are in flight, each with
    /// its own send deadline, none after `runDeadline` less `minimumLeaseTime`, paced by `pacer`.
    struct Continuation {
        let runDeadline: ContinuousClock.Instant
        let minimumLeaseTime: Duration
        let pacer: SendPacer
        /// With a spacing (a sweep that sends first), a lease that comes back short does not end the leasing: the
        /// next is taken while earlier sends are still in flight, once this long after the last. Without one, a
        /// short lease is the run's last.
        var leaseSpacing: Duration? = nil
    }

    /// Lease, send, record: everything due (of `eventKey`, or of any event), at most `limit` deliveries a lease; one
    /// lease, or with `continuation` as many as come due while it sends.
    func run(
        limit: Int, eventKey: String?, preLeased: OwedPush.Lease? = nil, database: DatabaseSession, push: PushResources,
        deadline: ContinuousClock.Instant, logger log: Logger, continuation: Continuation? = nil
    ) -> DeliveryReport {
        guard configuration.pushEnvironment != nil else {
            if configuration.fcmServiceAccountBase64 != nil || configuration.fcmServiceAccountFile != nil {
                log.error(
                    "push skipped: PUSH_ENVIRONMENT is not DEV or PROD",
                    metadata: ["config.variable": "PUSH_ENVIRONMENT"])
            } else {
                PushResources.logNoServiceAccount(log)
            }
            return DeliveryReport(skippedReason: "environment")
        }
        guard ContinuousClock.now < deadline else {
            log.warning("push deferred to the sweep: no time left before the deadline")
            return DeliveryReport(skippedReason: "deadline")
        }
        guard let provider = push.tokenProvider(logger: log) else {
            return DeliveryReport(skippedReason: "service account")
        }
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
            return DeliveryReport(skippedReason: "access token")
        }
        let opened = client.connectionsOpened
        var retry = RetryPolicy()
        if continuation == nil || configuration.pushFirstSend == .sweep {
            // A recording's own send holds nothing: one attempt per device (a re-minted token's aside), and a
            // retryable answer goes back to the queue due after its back-off, where the sweep, which stays
            // running, sends it on time. Waiting here would keep the recording's worker from its next request.
            // A sweep that sends first does the same: a lease waiting out one device's back-off would hold back
            // the next lease, and with it every recording queued meanwhile.
            retry.maxAttemptsPerLease = 1
        }
        let delivery = DeliveryRun(
            transport: client,
            store: DatabaseDeliveryStore(
                eventKey: eventKey, preLeased: preLeased, configuration: configuration, database: database,
                logger: log),
            clock: SystemDeliveryClock(),
            settings: .init(
                sendURL: "\(configuration.fcmAPIBaseURL)/v1/projects/\(provider.account.projectID)/messages:send",
                trust: configuration.trustStore, batchSize: limit,
                sendWindow: .milliseconds(configuration.pushSendDeadlineMilliseconds), retry: retry,
                continuation: continuation, waitsOutPauses: continuation != nil,
                validationTopic: configuration.fcmValidationTopic),
            accessToken: accessToken, logger: log
        ) { rejected, leaseDeadline in
            try provider.accessToken(
                connection: try database.connection(), rejected: rejected,
                timeoutMilliseconds: mintTimeout(until: leaseDeadline), logger: log)
        }
        var report = delivery.run(deadline: deadline)
        report.connectionsOpened = client.connectionsOpened - opened
        return report
    }

    /// A mint holds the shared advisory lock across its HTTP call: never longer than one statement may run, nor
    /// past the deadline.
    func mintTimeout(until deadline: ContinuousClock.Instant) -> Int {
        max(min(configuration.transactionSettings.statementTimeoutMilliseconds, (deadline - .now).milliseconds), 1)
    }
}

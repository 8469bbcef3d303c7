import Foundation
import Logging

extension PushDispatcher {
    /// One device's progress through its attempts.
    private struct Delivery {
        let claim: Claim
        let body: [UInt8]
        var attempts = 0
        var lastError: String?
        var status = "SENDING"
        var messageName: String?
        var disabledReason: PushDeviceRegistry.DisabledReason?
        /// Whether this device has already been retried with a re-minted access token.
        var retriedWithNewToken = false
    }

    /// Sends to every claimed device concurrently and records the outcomes.
    func send(
        _ event: DoseTakenEvent, displayName: String, to claims: [Claim], provider: AccessTokenProvider,
        connection: PostgresConnection, deadline: ContinuousClock.Instant, now: Date, logger: Logger
    ) -> Report {
        var deliveries = claims.map { claim in
            Delivery(claim: claim, body: DoseTakenMessage.json(for: event, displayName: displayName, deviceToken: claim.token))
        }
        var report = Report()
        /// Ends every claimed delivery as FAILED when nothing can be sent at all: no row stays SENDING.
        func failAll(_ reason: String) -> Report {
            for index in deliveries.indices {
                deliveries[index].status = "FAILED"
                deliveries[index].lastError = reason
            }
            record(deliveries, connection: connection, logger: logger, report: &report)
            return report
        }
        let accessToken: String
        do {
            accessToken = try provider.accessToken(
                connection: connection, now: now, timeoutMilliseconds: remainingMilliseconds(until: deadline),
                logger: logger)
        } catch {
            logger.error("push failed: no FCM access token", metadata: ["error": .string(String(describing: error))])
            return failAll("access token unavailable")
        }
        let client: HTTPClient
        do {
            client = try HTTPClient()
        } catch {
            logger.error("push failed: HTTP client unavailable")
            return failAll("HTTP client unavailable")
        }
        let url = "\(configuration.fcmAPIBaseURL)/v1/projects/\(provider.account.projectID)/messages:send"
        var currentToken = accessToken
        var refreshedToken = false
        func request(_ index: Int) -> HTTPRequest {
            HTTPRequest(
                method: "POST", url: url,
                headers: [("Authorization", "Bearer \(currentToken)"), ("Content-Type", "application/json; charset=UTF-8")],
                body: deliveries[index].body, responseBodyLimit: 64 * 1024)
        }
        func attempt(_ index: Int, at due: ContinuousClock.Instant = .now) {
            deliveries[index].attempts += 1
            client.schedule(request(index), tag: index, at: due, timeoutMilliseconds: attemptTimeout(until: deadline, from: due))
        }
        for index in deliveries.indices { attempt(index) }
        client.run(until: deadline) { index, result in
            let outcome: FCMSendOutcome
            switch result {
            case .success(let response):
                outcome = FCMSendOutcome.classify(response)
            case .failure(let error) where error.kind == .deadlineExceeded:
                deliveries[index].status = "FAILED"
                deliveries[index].lastError = deliveries[index].lastError.map { "\($0); deadline exceeded" } ?? "deadline exceeded"
                return
            case .failure(let error):
                outcome = error.isTransient ? .retry(retryAfter: nil, error: error.description) : .fail(error: error.description)
            }
            switch outcome {
            case .sent(let name):
                deliveries[index].status = "SENT"
                deliveries[index].messageName = name
            case .disableDevice(let reason, let error):
                deliveries[index].status = "DISABLED_TOKEN"
                deliveries[index].disabledReason = reason
                deliveries[index].lastError = error
            case .fail(let error):
                deliveries[index].status = "FAILED"
                deliveries[index].lastError = error
            case .retry(let retryAfter, let error):
                deliveries[index].lastError = error
                let due = ContinuousClock.now + backoff(afterAttempt: deliveries[index].attempts, retryAfter: retryAfter)
                if deliveries[index].attempts < Self.maxAttempts, due < deadline {
                    attempt(index, at: due)
                } else {
                    deliveries[index].status = "FAILED"
                }
            case .refreshAccessToken:
                deliveries[index].lastError = "401 UNAUTHENTICATED"
                guard !deliveries[index].retriedWithNewToken else {
                    deliveries[index].status = "FAILED"
                    return
                }
                deliveries[index].retriedWithNewToken = true
                if !refreshedToken {
                    // One re-mint per dispatch: every device refused with the old token retries with the new one.
                    refreshedToken = true
                    do {
                        currentToken = try provider.accessToken(
                            connection: connection, rejected: currentToken,
                            timeoutMilliseconds: remainingMilliseconds(until: deadline), logger: logger)
                    } catch {
                        logger.error("push: access token refresh failed", metadata: ["error": .string(String(describing: error))])
                        deliveries[index].status = "FAILED"
                        return
                    }
                }
                attempt(index)
            }
        }
        report.connectionsOpened = client.connectionsOpened
        record(deliveries, connection: connection, logger: logger, report: &report)
        return report
    }

    /// Writes each delivery's outcome and disables dead tokens, in one transaction.
    private func record(_ deliveries: [Delivery], connection: PostgresConnection, logger: Logger, report: inout Report) {
        for delivery in deliveries {
            switch delivery.status {
            case "SENT": report.sent += 1
            case "DISABLED_TOKEN": report.disabled += 1
            default: report.failed += 1
            }
            let level: Logger.Level = delivery.status == "SENT" ? .debug : .warning
            logger.log(
                level: level, "push delivery finished",
                metadata: [
                    "push.device": .string(delivery.claim.deviceID.uuidString.lowercased()),
                    "push.token_hash": .string(SHA256.hexPrefix(of: delivery.claim.token)),
                    "push.status": .string(delivery.status), "push.attempts": .stringConvertible(delivery.attempts),
                    "push.error": .string(delivery.lastError ?? ""),
                ])
        }
        do {
            try connection.withTransaction { connection in
                for delivery in deliveries {
                    let status = delivery.status == "SENDING" ? "FAILED" : delivery.status
                    try connection.query(
                        """
                        UPDATE push_deliveries
                        SET status = \(status), attempts = \(delivery.attempts), last_error = \(delivery.lastError),
                            fcm_message_name = \(delivery.messageName), updated_at = now()
                        WHERE id = \(delivery.claim.deliveryID)
                        """)
                    if let reason = delivery.disabledReason {
                        try connection.query(
                            """
                            UPDATE push_devices
                            SET is_enabled = false, disabled_reason = \(reason.rawValue), updated_at = now()
                            WHERE id = \(delivery.claim.deviceID) AND is_enabled
                            """)
                    }
                }
            }
        } catch {
            logger.error("push outcomes could not be recorded", metadata: ["error.type": .string(String(describing: type(of: error)))])
        }
    }

    /// Exponential back-off with jitter ("equal jitter": half fixed, half random), never shorter than `Retry-After`.
    func backoff(afterAttempt attempt: Int, retryAfter: TimeInterval?) -> Duration {
        let exponential = Self.baseBackoff * pow(2, Double(max(attempt - 1, 0)))
        let jittered = exponential / 2 + Double.random(in: 0...(exponential / 2))
        return .milliseconds(Int(max(jittered, retryAfter ?? 0) * 1000))
    }

    private func remainingMilliseconds(until deadline: ContinuousClock.Instant) -> Int {
        max((deadline - .now).milliseconds, 1)
    }

    /// One attempt may use up to 5 s, and never outlive the deadline.
    private func attemptTimeout(until deadline: ContinuousClock.Instant, from start: ContinuousClock.Instant) -> Int {
        max(min(5000, (deadline - start).milliseconds), 1)
    }
}

import Foundation
import Logging

/// Tells every enabled device of every linked caregiver, exactly once, that a dose was taken (SPEC §9).
///
/// 1. Claims a `push_deliveries` row per recipient device with `INSERT … ON CONFLICT DO NOTHING RETURNING`: only
///    devices claimed by this call are sent to, so retries, concurrent duplicates and repeated triggers of one
///    event give one push per device.
/// 2. Sends all claimed devices concurrently over one ``HTTPClient``, retrying transient failures with exponential
///    back-off and jitter (honouring `Retry-After`), re-minting the access token once on a 401.
/// 3. Records each outcome on its delivery row and disables dead tokens.
///
/// Everything is bounded by `PUSH_SEND_DEADLINE_MS` and nothing is thrown: this runs after the response.
public struct PushDispatcher {
    /// Attempts per device, the first included (the Admin SDKs retry 4 times).
    static let maxAttempts = 5
    /// First back-off; doubled for each further attempt.
    static let baseBackoff: TimeInterval = 0.5

    public let configuration: Configuration
    public let logger: Logger

    public init(configuration: Configuration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// What one dispatch did, for logs, tests and benchmarks.
    public struct Report: Equatable, Sendable {
        public var claimed = 0
        public var sent = 0
        public var disabled = 0
        public var failed = 0
        public var connectionsOpened = 0
        public var skippedReason: String?
    }

    /// Sends the notifications for `event`. Never throws; failures end in the log and on delivery rows.
    @discardableResult
    public func dispatch(
        _ event: DoseTakenEvent, database: DatabaseSession, push: PushResources, now: Date = Date()
    ) -> Report {
        let deadline = ContinuousClock.now + .milliseconds(configuration.pushSendDeadlineMilliseconds)
        var log = logger
        log[metadataKey: "push.event"] = .string(event.collapseID)
        guard let environment = configuration.pushEnvironment else {
            if configuration.fcmServiceAccountBase64 != nil || configuration.fcmServiceAccountFile != nil {
                log.error("push skipped: PUSH_ENVIRONMENT is not DEV or PROD", metadata: ["config.variable": "PUSH_ENVIRONMENT"])
            } else {
                log.warning("push skipped: no FCM service account configured", metadata: ["config.variable": "FCM_SERVICE_ACCOUNT_JSON"])
            }
            return Report(skippedReason: "environment")
        }
        guard let provider = push.tokenProvider(logger: log) else { return Report(skippedReason: "service account") }
        do {
            let connection = try database.connection()
            let claims = try claimDeliveries(for: event, environment: environment, connection: connection)
            guard !claims.isEmpty else {
                log.info("push has no new recipients")
                return Report()
            }
            let displayName = try patientDisplayName(event.patientID, connection: connection)
            var report = send(
                event, displayName: displayName, to: claims, provider: provider, connection: connection,
                deadline: deadline, now: now, logger: log)
            report.claimed = claims.count
            log.info(
                "push dispatched",
                metadata: [
                    "push.claimed": .stringConvertible(report.claimed), "push.sent": .stringConvertible(report.sent),
                    "push.disabled": .stringConvertible(report.disabled), "push.failed": .stringConvertible(report.failed),
                ])
            return report
        } catch {
            log.error(
                "push dispatch failed", metadata: ["error.type": .string(String(describing: type(of: error)))])
            return Report(skippedReason: "error")
        }
    }

    /// A device this call has claimed for the event.
    struct Claim {
        let deliveryID: UUID
        let deviceID: UUID
        let token: String
    }

    /// Recipients (active links, minus the acting caregiver; enabled devices in this environment), claimed in one
    /// statement. Served by `caregiver_patient_links_active_by_patient` and `push_devices_enabled_by_owner`.
    func claimDeliveries(
        for event: DoseTakenEvent, environment: Configuration.PushEnvironment, connection: PostgresConnection
    ) throws -> [Claim] {
        try connection.query(
            """
            WITH recipients AS (
                SELECT d.id, d.token
                FROM caregiver_patient_links l
                JOIN push_devices d
                  ON d.owner_type = 'CAREGIVER' AND d.owner_id = l.caregiver_id
                 AND d.environment = \(environment.rawValue) AND d.is_enabled
                WHERE l.patient_id = \(event.patientID) AND l.revoked_at IS NULL
                  AND l.caregiver_id IS DISTINCT FROM \(event.actingCaregiverID)::uuid
            ), claimed AS (
                INSERT INTO push_deliveries (event_key, push_device_id, status, attempts)
                SELECT \(event.eventKey), id, 'SENDING', 0 FROM recipients
                ON CONFLICT (event_key, push_device_id) DO NOTHING
                RETURNING id, push_device_id
            )
            SELECT claimed.id, recipients.id, recipients.token
            FROM claimed JOIN recipients ON recipients.id = claimed.push_device_id
            """
        ).map { row in
            let (deliveryID, deviceID, token) = try row.decode((UUID, UUID, String).self)
            return Claim(deliveryID: deliveryID, deviceID: deviceID, token: token)
        }
    }

    private func patientDisplayName(_ patientID: UUID, connection: PostgresConnection) throws -> String {
        guard let row = try connection.query("SELECT display_name FROM patients WHERE id = \(patientID)").single else {
            throw PostgresError(.unexpectedResult, serverMessage: "patient not found")
        }
        return try row.decode(String.self, at: 0)
    }
}

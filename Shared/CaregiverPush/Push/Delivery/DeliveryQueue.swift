import Codecs
import Libpq
import PushPayloadContract
import FoundationEssentials
import Logging

/// A delivery leased for sending: the device, its token and everything its message needs.
struct LeasedDelivery {
    let deliveryID: UUID
    let deviceID: UUID
    let token: String
    /// Attempts so far, this lease's first one included.
    let attempts: Int
    /// Its event's message, encoded once for every delivery of the event in the lease.
    let message: DoseTakenMessage.Template
    /// The HTTP v1 field the message names the device by (`token` holds a FID when this is `.fid`).
    var target: PushDeviceRegistry.Target = .token
    var event: DoseTakenEvent { message.event }

    /// The message to this device, addressed by its kind of identity.
    var body: [UInt8] {
        switch target {
        case .token: message.json(deviceToken: token)
        case .fid: message.json(fid: token)
        }
    }
}

/// What became of one leased delivery.
struct DeliveryOutcome {
    enum Status: String {
        case sent = "SENT"
        case failed = "FAILED"
        case disabledToken = "DISABLED_TOKEN"
        /// Not sent, for now: back to the queue, due after `retryDelayMilliseconds`.
        case pending = "PENDING"
    }

    let delivery: LeasedDelivery
    var status: Status
    var attempts: Int
    var lastError: String?
    var messageName: String?
    var disabledReason: PushDeviceRegistry.DisabledReason?
    var retryDelayMilliseconds = 0
}

/// The `push_deliveries` queue: leases and outcomes (docs/behaviour.md#delivery-states, docs/behaviour.md#leases).
///
/// A delivery is `PENDING` (owed, due at `next_attempt_at`), `SENDING` (leased until `lease_until` by the holder of
/// `lease_token`), or final: `SENT`, `FAILED`, `DISABLED_TOKEN`, `EXPIRED`. Whoever sends leases first, in one
/// statement with `FOR UPDATE SKIP LOCKED`, so two senders never hold the same delivery; a sender that dies leaves a
/// lease that runs out, and `push-sweep` leases the delivery again.
enum DeliveryQueue {
    /// Leases due deliveries — `PENDING` past `next_attempt_at`, or `SENDING` past `lease_until` — whose device is
    /// still enabled, whose owner is still linked to the event's patient (a link the app revoked after the recording
    /// ends the delivery's chances: it is never sent, and expires), and whose event is younger than
    /// `PUSH_MAX_AGE_SECONDS`: of one event (a revised event's rows) or of any (the sweep), the longest due first
    /// (`push_deliveries_due`), at most `limit`. One call of `lease_push_deliveries`.
    /// - Returns: the lease token and the deliveries it holds.
    static func lease(
        eventKey: String?, limit: Int, configuration: Configuration, database: DatabaseSession
    ) throws -> (token: UUID, deliveries: [LeasedDelivery]) {
        let token = UUID.random()
        // One PL/pgSQL call (migration 000017): the statement's plan is kept for the server connection's life.
        let rows = try database.connection().transaction([
            """
            SELECT * FROM caregiver_push.lease_push_deliveries(
                \(eventKey)::text, \(token)::uuid, \(limit)::integer, \(configuration.pushMaxAgeSeconds)::integer,
                \(configuration.pushLeaseSeconds)::double precision)
            """
        ])[0]
        return (token, try leased(rows))
    }

    /// The deliveries of a lease's rows: the lease statement's `RETURNING`, or the recording outbox's, which leases
    /// what it queues (``PushOutbox``), in the same order. The event's columns are read, and its message encoded, once per
    /// event and language (a fan-out's rows all share one event).
    static func leased(_ rows: PostgresRows) throws -> [LeasedDelivery] {
        var events: [String: (event: DoseTakenEvent, displayName: String)] = [:]
        var messages: [String: DoseTakenMessage.Template] = [:]
        return try rows.map { row in
            let (deliveryID, deviceID, token, attempts) = try row.decode((UUID, UUID, String, Int).self)
            let eventKey = try row.decode(String.self, at: 4)
            let target = PushDeviceRegistry.Target(rawValue: try row.decode(String.self, at: 12)) ?? .token
            let language = try row.decode(String.self, at: 14)
            let messageKey = "\(language) \(eventKey)"
            if let message = messages[messageKey] {
                return LeasedDelivery(
                    deliveryID: deliveryID, deviceID: deviceID, token: token, attempts: attempts, message: message,
                    target: target)
            }
            let (event, displayName) = try events[eventKey] ?? Self.event(row, key: eventKey)
            events[eventKey] = (event, displayName)
            let message = DoseTakenMessage.Template(event: event, displayName: displayName, language: language)
            messages[messageKey] = message
            return LeasedDelivery(
                deliveryID: deliveryID, deviceID: deviceID, token: token, attempts: attempts, message: message,
                target: target)
        }
    }

    /// How long until the next delivery falls due that is not due yet — a `PENDING` one's `next_attempt_at`, a
    /// `SENDING` one's `lease_until` — in milliseconds by the database's clock; `nil` when none is waiting. The first
    /// entry of `push_deliveries_due` past now.
    static func millisecondsToNextDue(database: DatabaseSession) throws -> Int? {
        try database.connection().readOnlyTransaction(
            """
            SELECT ceil(extract(epoch FROM min(
                CASE WHEN status = 'PENDING' THEN next_attempt_at ELSE lease_until END) - now()) * 1000)::bigint
            FROM caregiver_push.push_deliveries
            WHERE status IN ('PENDING', 'SENDING')
              AND (CASE WHEN status = 'PENDING' THEN next_attempt_at ELSE lease_until END) > now()
            """
        ).single?.decode(Int?.self, at: 0)
    }

    /// Gives back what a lease holds and did not send (a skipped send: no access token, FCM's pause): `PENDING` again,
    /// due after `delayMilliseconds`, with the attempt the lease counted taken back. One statement, by the lease's
    /// token: only rows it still holds change.
    static func release(
        lease: UUID, delayMilliseconds: Int, reason: String, database: DatabaseSession, logger: Logger
    ) {
        do {
            _ = try database.connection().transaction([
                """
                UPDATE caregiver_push.push_deliveries
                SET status = 'PENDING', attempts = greatest(attempts - 1, 0), last_error = \(reason),
                    next_attempt_at = now() + make_interval(secs => \(Double(delayMilliseconds) / 1000)),
                    lease_until = NULL, lease_token = NULL, updated_at = now()
                WHERE lease_token = \(lease) AND status = 'SENDING'
                """
            ])
        } catch {
            logger.error(
                "push lease could not be given back; it will run out and the sweep will send",
                metadata: ErrorMetadata.of(error))
        }
    }

    /// The event a lease's row carries, and its patient's display name.
    private static func event(_ row: PostgresRow, key eventKey: String) throws -> (DoseTakenEvent, String) {
        let (patientID, date, slot) = try (
            row.decode(AppID.self, at: 5), row.decode(String.self, at: 6), row.decode(String.self, at: 7)
        )
        let (group, takenAt, withinTime, displayName) = try (
            row.decode(AppID?.self, at: 8), row.decode(Date.self, at: 9), row.decode(Bool.self, at: 10),
            row.decode(String.self, at: 11)
        )
        guard let slot = Slot(rawValue: slot),
            let recorder = PushOutbox.StoredRecorder(rawValue: try row.decode(String.self, at: 13))
        else {
            throw PostgresError(.decoding, serverMessage: "push_events.slot or recorded_by out of range")
        }
        let event = DoseTakenEvent(
            storedKey: eventKey, patientID: patientID, date: date, slot: slot, recordingGroupID: group,
            takenAt: takenAt, withinTime: withinTime, recorder: recorder.recorder)
        return (event, displayName)
    }

    /// Records outcomes and disables dead tokens in one transaction: one call of `record_push_outcomes` over arrays of
    /// the outcomes' columns and of the dead tokens' devices, whatever the batch size.
    ///
    /// A message sent from an older revision of its event than the event's now (a later recording merged into it
    /// while it was being sent, docs/behaviour.md#on-time) is not `SENT` but owed again, due now.
    ///
    /// Only rows still held by `lease` change: a sender whose lease ran out cannot overwrite the outcome of the one
    /// that took over. When the connection died while sending, the session reconnects once and tries again.
    /// - Returns: how many deliveries were updated (fewer than `outcomes` when a lease was lost), or `nil` when
    ///   nothing could be recorded: the leases then run out and the sweep sends again.
    @discardableResult
    static func record(
        _ outcomes: [DeliveryOutcome], lease: UUID, database: DatabaseSession, logger: Logger
    ) -> Int? {
        guard !outcomes.isEmpty else { return 0 }
        let ids = PostgresArray.literal(outcomes.map { $0.delivery.deliveryID.uuidString.lowercased() })
        let statuses = PostgresArray.literal(outcomes.map { $0.status.rawValue })
        let attempts = PostgresArray.literal(outcomes.map { String($0.attempts) })
        let errors = PostgresArray.literal(outcomes.map(\.lastError))
        let names = PostgresArray.literal(outcomes.map(\.messageName))
        let delays = PostgresArray.literal(outcomes.map { String($0.retryDelayMilliseconds) })
        let dead = outcomes.filter { $0.disabledReason != nil }
        let devices = PostgresArray.literal(dead.map { $0.delivery.deviceID.uuidString.lowercased() })
        let reasons = PostgresArray.literal(dead.map { $0.disabledReason?.rawValue })
        for attempt in 1...2 {
            do {
                // One PL/pgSQL call (migration 000017) in one round trip: BEGIN, the settings, the call, COMMIT.
                let updated = try database.connection().transaction([
                    """
                    SELECT caregiver_push.record_push_outcomes(
                        \(lease)::uuid, \(ids)::uuid[], \(statuses)::text[], \(attempts)::integer[], \(errors)::text[],
                        \(names)::text[], \(delays)::bigint[], \(devices)::uuid[], \(reasons)::text[])
                    """
                ])[0][0].decode(Int.self, at: 0)
                if updated < outcomes.count {
                    logger.warning(
                        "push lease lost: another sender took over some deliveries",
                        metadata: ["push.lost": .stringConvertible(outcomes.count - updated)])
                }
                return updated
            } catch let error as PostgresError where attempt == 1 && (error.isUnavailable || !database.isOpen) {
                // The connection may have died while we were sending: one fresh connection, one more try.
                logger.warning(
                    "push outcomes: reconnecting to record them", metadata: ["db.code": .string(error.code.description)]
                )
                database.close()
            } catch {
                logger.error(
                    "push outcomes could not be recorded; the leases will run out and the sweep will resend",
                    metadata: ErrorMetadata.of(error))
                return nil
            }
        }
        return nil
    }
}

/// PostgreSQL's array literal, bound as text and cast (`\(literal)::uuid[]`): each element double-quoted with its
/// quotes and backslashes escaped, `NULL` unquoted.
enum PostgresArray {
    static func literal(_ values: [String?]) -> String {
        var text = "{"
        text.reserveCapacity(values.count * 40 + 2)
        for (index, value) in values.enumerated() {
            if index > 0 { text.append(",") }
            guard let value else {
                text.append("NULL")
                continue
            }
            text.append("\"")
            if value.utf8.contains(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
                for character in value.unicodeScalars {
                    if character == "\"" || character == "\\" { text.append("\\") }
                    text.unicodeScalars.append(character)
                }
            } else {
                text.append(value)
            }
            text.append("\"")
        }
        text.append("}")
        return text
    }

    static func literal(_ values: [String]) -> String { literal(values.map(Optional.some)) }
}

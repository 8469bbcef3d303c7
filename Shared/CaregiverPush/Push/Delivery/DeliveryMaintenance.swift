import Libpq

/// The push queue's bookkeeping that `push-sweep` runs around its sends (docs/behaviour.md#sweep): devices gone
/// stale, deliveries that can no longer be sent, and rows past their retention. Each statement runs in its own
/// bounded transaction over a bounded batch, with `FOR UPDATE SKIP LOCKED`, so overlapping sweeps are safe.
struct DeliveryMaintenance {
    /// Rows one statement touches, and how many such statements one step may run.
    static let rowsPerStatement = 1000
    static let roundsPerStep = 10

    let configuration: Configuration
    let database: DatabaseSession

    /// Runs `statement` until it touches fewer than a batch of rows, at most ``roundsPerStep`` times.
    private func rounds(_ statement: () -> PostgresQuery) throws -> Int {
        var total = 0
        for _ in 0..<Self.roundsPerStep {
            let touched = try database.withTransaction { try $0.query(statement()).affectedRows }
            total += touched
            if touched < Self.rowsPerStatement { break }
        }
        return total
    }

    /// Devices not seen for `PUSH_DEVICE_STALE_DAYS`: Android tokens expire at 270 days, and Google advises
    /// treating older tokens as dead.
    func pruneStaleDevices() throws -> Int {
        try rounds {
            """
            WITH stale AS (
                SELECT id FROM caregiver_push.push_devices
                WHERE is_enabled AND last_seen_at < now() - make_interval(days => \(configuration.pushDeviceStaleDays))
                ORDER BY last_seen_at LIMIT \(Self.rowsPerStatement)
                FOR UPDATE SKIP LOCKED
            )
            UPDATE caregiver_push.push_devices d
            SET is_enabled = false, disabled_reason = 'STALE', updated_at = now()
            FROM stale WHERE d.id = stale.id
            """
        }
    }

    /// Due deliveries whose device was disabled after the event was written: never sent, and the reason kept.
    func endDisabledDeviceDeliveries() throws -> Int {
        try rounds {
            """
            WITH orphaned AS (
                SELECT p.id FROM caregiver_push.push_deliveries p
                JOIN caregiver_push.push_devices d ON d.id = p.push_device_id
                WHERE NOT d.is_enabled
                  AND (p.status = 'PENDING' OR (p.status = 'SENDING' AND p.lease_until <= now()))
                LIMIT \(Self.rowsPerStatement)
                FOR UPDATE OF p SKIP LOCKED
            )
            UPDATE caregiver_push.push_deliveries p
            SET status = 'FAILED', last_error = 'device disabled (' || d.disabled_reason || ') before sending',
                lease_until = NULL, lease_token = NULL, updated_at = now()
            FROM orphaned, caregiver_push.push_devices d
            WHERE p.id = orphaned.id AND d.id = p.push_device_id
            """
        }
    }

    /// Due deliveries whose event is older than `PUSH_MAX_AGE_SECONDS`: a late "just took the medicine" would
    /// mislead, so they are never sent.
    func expireOldDeliveries() throws -> Int {
        try rounds {
            """
            WITH old AS (
                SELECT p.id FROM caregiver_push.push_deliveries p
                JOIN caregiver_push.push_events e ON e.event_key = p.event_key
                WHERE (p.status = 'PENDING' OR (p.status = 'SENDING' AND p.lease_until <= now()))
                  AND e.created_at <= now() - make_interval(secs => \(configuration.pushMaxAgeSeconds))
                LIMIT \(Self.rowsPerStatement)
                FOR UPDATE OF p SKIP LOCKED
            )
            UPDATE caregiver_push.push_deliveries p
            SET status = 'EXPIRED',
                last_error = CASE WHEN p.last_error IS NULL THEN 'expired: not sent within PUSH_MAX_AGE_SECONDS'
                             ELSE 'expired after ' || p.attempts || ' attempts; last: ' || p.last_error END,
                lease_until = NULL, lease_token = NULL, updated_at = now()
            FROM old WHERE p.id = old.id
            """
        }
    }

    /// Devices disabled (or last changed while disabled) before the retention: their reason has been shown long
    /// enough. Their deliveries go with them (all final by then: the sweep ends a disabled device's due ones).
    func deleteOldDisabledDevices() throws -> Int {
        try rounds {
            """
            WITH old AS (
                SELECT id FROM caregiver_push.push_devices
                WHERE NOT is_enabled
                  AND updated_at < now() - make_interval(days => \(configuration.pushRetentionDays))
                ORDER BY updated_at LIMIT \(Self.rowsPerStatement)
                FOR UPDATE SKIP LOCKED
            )
            DELETE FROM caregiver_push.push_devices d USING old WHERE d.id = old.id
            """
        }
    }

    /// Final deliveries last changed before the retention, then events older than it with no delivery left.
    /// Nothing owed is ever deleted: an event goes only once all its deliveries have.
    func deleteOldFinalRows() throws -> (deliveries: Int, events: Int) {
        let days = configuration.pushRetentionDays
        let deliveries = try rounds {
            """
            WITH old AS (
                SELECT id FROM caregiver_push.push_deliveries
                WHERE status IN ('SENT', 'FAILED', 'DISABLED_TOKEN', 'EXPIRED')
                  AND updated_at < now() - make_interval(days => \(days))
                LIMIT \(Self.rowsPerStatement)
            )
            DELETE FROM caregiver_push.push_deliveries p USING old WHERE p.id = old.id
            """
        }
        let events = try rounds {
            """
            WITH old AS (
                SELECT e.event_key FROM caregiver_push.push_events e
                WHERE e.created_at < now() - make_interval(days => \(days))
                  AND NOT EXISTS (SELECT 1 FROM caregiver_push.push_deliveries p WHERE p.event_key = e.event_key)
                LIMIT \(Self.rowsPerStatement)
                FOR UPDATE SKIP LOCKED
            )
            DELETE FROM caregiver_push.push_events e USING old WHERE e.event_key = old.event_key
            """
        }
        return (deliveries, events)
    }
}

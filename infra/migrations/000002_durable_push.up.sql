-- Durable push (docs/behaviour.md#outbox, docs/behaviour.md#delivery-states): the push event and one PENDING delivery
-- per recipient device are written in the recording transaction (an outbox); senders lease deliveries; `push-sweep`
-- finishes what a dead sender left, expires what is too old, disables stale devices and deletes old final rows.

-- One row per push event, keyed by the event key (docs/behaviour.md#event-key): what the message needs, decided at
-- commit time.
CREATE TABLE push_events (
    event_key          text PRIMARY KEY CHECK (char_length(event_key) BETWEEN 1 AND 200),
    -- The message type (the `data.type` of the push).
    kind               text NOT NULL CHECK (kind IN ('DOSE_TAKEN')),
    -- The function whose transaction wrote the event (for operators; never sent).
    source             text NOT NULL CHECK (source IN ('dose-record', 'slot-bulk-record', 'prn-record')),
    patient_id         uuid NOT NULL REFERENCES patients (id) ON DELETE CASCADE,
    -- The dose's Tokyo date and slot, and the slot recording's group.
    local_date         date NOT NULL,
    slot               text NOT NULL CHECK (slot IN ('morning', 'noon', 'evening', 'bedtime')),
    recording_group_id uuid,
    within_time        boolean NOT NULL,
    taken_at           timestamptz NOT NULL,
    -- When the event was committed: PUSH_MAX_AGE_SECONDS counts from here.
    created_at         timestamptz NOT NULL DEFAULT now()
);
-- Retention: events older than the retention whose deliveries are all final.
CREATE INDEX push_events_by_created_at ON push_events (created_at);
CREATE INDEX push_events_by_patient ON push_events (patient_id);

-- Deliveries from before the outbox were claimed after the response and have no event. A row still SENDING was lost
-- with the process that claimed it (it would never have been retried); it ends FAILED with that reason.
UPDATE push_deliveries
SET status = 'FAILED', last_error = 'lost before durable delivery (claimed before the outbox)', updated_at = now()
WHERE status = 'SENDING';

ALTER TABLE push_deliveries DROP CONSTRAINT push_deliveries_status_check;
ALTER TABLE push_deliveries
    ADD CONSTRAINT push_deliveries_status_check
        CHECK (status IN ('PENDING', 'SENDING', 'SENT', 'FAILED', 'DISABLED_TOKEN', 'EXPIRED')),
    -- Not before this instant (back-off after a transient failure).
    ADD COLUMN next_attempt_at timestamptz NOT NULL DEFAULT now(),
    -- While SENDING: nobody else sends this delivery before `lease_until`; the lease token names the holder, so
    -- that a sender whose lease ran out cannot overwrite the outcome of the one that took over.
    ADD COLUMN lease_until timestamptz,
    ADD COLUMN lease_token uuid,
    ADD CONSTRAINT push_deliveries_lease_check
        CHECK ((status = 'SENDING') = (lease_until IS NOT NULL AND lease_token IS NOT NULL)),
    -- Every delivery belongs to an event. NOT VALID: rows from before the outbox have none; every new row is checked.
    ADD CONSTRAINT push_deliveries_event_key_fkey
        FOREIGN KEY (event_key) REFERENCES push_events (event_key) ON DELETE CASCADE NOT VALID;

-- The sweep's two queues: PENDING rows by when they are due, SENDING rows by when their lease runs out.
CREATE INDEX push_deliveries_pending_due ON push_deliveries (next_attempt_at) WHERE status = 'PENDING';
CREATE INDEX push_deliveries_leased_until ON push_deliveries (lease_until) WHERE status = 'SENDING';
-- Retention: final rows by their last change.
CREATE INDEX push_deliveries_final_by_updated_at
    ON push_deliveries (updated_at) WHERE status IN ('SENT', 'FAILED', 'DISABLED_TOKEN', 'EXPIRED');

-- Devices not seen for PUSH_DEVICE_STALE_DAYS are disabled as STALE (their FCM token has expired or will).
ALTER TABLE push_devices DROP CONSTRAINT push_devices_disabled_reason_check;
ALTER TABLE push_devices
    ADD CONSTRAINT push_devices_disabled_reason_check CHECK (disabled_reason IN (
        'USER_DISABLED', 'REPLACED', 'TOKEN_REASSIGNED', 'UNREGISTERED', 'SENDER_ID_MISMATCH', 'INVALID_ARGUMENT',
        'STALE'));
CREATE INDEX push_devices_enabled_by_last_seen ON push_devices (last_seen_at) WHERE is_enabled;

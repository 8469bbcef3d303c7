-- Bounded growth per caregiver (docs/behaviour.md#limits): a device token is at most 512 bytes (the request's own
-- limit, now the table's too; NOT VALID: rows stored under the old 4096-byte limit stay, new ones are checked), and
-- the sweep finds disabled devices by when they were disabled, to delete them after PUSH_RETENTION_DAYS.
ALTER TABLE push_devices
    ADD CONSTRAINT push_devices_token_length CHECK (octet_length(token) <= 512) NOT VALID;

CREATE INDEX push_devices_disabled_by_updated ON push_devices (updated_at) WHERE NOT is_enabled;

-- Those deletions run as the runtime role (the sweep's retention, registration's cap on disabled rows): it may now
-- delete devices, and still nothing else it did not already have.
GRANT DELETE ON push_devices TO caregiver_push_runtime;

-- The whole schema (docs/behaviour.md#data-model). Every query a request makes is served by an index named here; the
-- comment on each index says which query it serves.

CREATE TABLE patients (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    display_name text NOT NULL CHECK (char_length(display_name) BETWEEN 1 AND 50),
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE caregiver_patient_links (
    caregiver_id uuid NOT NULL,
    patient_id   uuid NOT NULL REFERENCES patients (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz,
    PRIMARY KEY (caregiver_id, patient_id)
);
-- Push recipients: the caregivers actively linked to one patient. (The primary key serves
-- "is this caregiver linked to this patient".)
CREATE INDEX caregiver_patient_links_active_by_patient
    ON caregiver_patient_links (patient_id, caregiver_id) WHERE revoked_at IS NULL;

CREATE TABLE patient_sessions (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    patient_id uuid NOT NULL REFERENCES patients (id) ON DELETE CASCADE,
    -- SHA-256 of the whole token text; the token itself is never stored. The unique index serves the lookup.
    token_hash bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE INDEX patient_sessions_by_patient ON patient_sessions (patient_id);

CREATE TABLE medications (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    patient_id  uuid NOT NULL REFERENCES patients (id) ON DELETE CASCADE,
    -- Health data: never leaves the database in a push, a response of the push path, or a log.
    name        text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    is_prn      boolean NOT NULL DEFAULT false,
    start_date  date NOT NULL,
    end_date    date,
    archived_at timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (end_date IS NULL OR end_date >= start_date),
    -- Lets dose records reference (medication, patient) together, so a record can never pair a patient with
    -- another patient's medication.
    UNIQUE (id, patient_id)
);
-- Slot bulk recording: the patient's unarchived medications.
CREATE INDEX medications_active_by_patient ON medications (patient_id) WHERE archived_at IS NULL;

CREATE TABLE medication_schedule_times (
    medication_id uuid NOT NULL REFERENCES medications (id) ON DELETE CASCADE,
    time_of_day   time NOT NULL CHECK (extract(second FROM time_of_day) = 0),  -- minute precision
    PRIMARY KEY (medication_id, time_of_day)
);

CREATE TABLE dose_records (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    patient_id         uuid NOT NULL,
    medication_id      uuid NOT NULL,
    scheduled_at       timestamptz NOT NULL,
    taken_at           timestamptz NOT NULL,
    recorded_by_role   text NOT NULL CHECK (recorded_by_role IN ('PATIENT', 'CAREGIVER')),
    recorded_by_id     uuid NOT NULL,
    recording_group_id uuid,
    created_at         timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (medication_id, patient_id) REFERENCES medications (id, patient_id) ON DELETE CASCADE,
    -- One TAKEN record per scheduled dose: what makes repeated and concurrent recording idempotent.
    UNIQUE (patient_id, medication_id, scheduled_at)
);
CREATE INDEX dose_records_by_group ON dose_records (recording_group_id) WHERE recording_group_id IS NOT NULL;
CREATE INDEX dose_records_by_medication ON dose_records (medication_id);

CREATE TABLE prn_dose_records (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    patient_id          uuid NOT NULL,
    medication_id       uuid NOT NULL,
    taken_at            timestamptz NOT NULL,
    quantity            integer NOT NULL CHECK (quantity BETWEEN 1 AND 10),
    idempotency_key     uuid,
    request_fingerprint text,
    recorded_by_role    text NOT NULL CHECK (recorded_by_role IN ('PATIENT', 'CAREGIVER')),
    recorded_by_id      uuid NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (medication_id, patient_id) REFERENCES medications (id, patient_id) ON DELETE CASCADE,
    -- Idempotency-Key is scoped to the patient; NULL keys never collide.
    UNIQUE (patient_id, idempotency_key),
    CHECK ((idempotency_key IS NULL) = (request_fingerprint IS NULL))
);
CREATE INDEX prn_dose_records_by_patient_time ON prn_dose_records (patient_id, taken_at);
CREATE INDEX prn_dose_records_by_medication ON prn_dose_records (medication_id);

CREATE TABLE push_devices (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_type      text NOT NULL CHECK (owner_type IN ('CAREGIVER')),
    owner_id        uuid NOT NULL,
    token           text NOT NULL CHECK (char_length(token) BETWEEN 1 AND 4096),
    -- A B-tree entry holds at most ~2.7 kB, and a token may be 4096 characters: uniqueness and look-ups by token
    -- go through its SHA-256, which is equal exactly when the tokens are. The application computes it (a generated
    -- column cannot use convert_to, which is only STABLE); the CHECK keeps the two in step.
    token_sha256    bytea NOT NULL CHECK (token_sha256 = sha256(convert_to(token, 'UTF8'))),
    platform        text NOT NULL CHECK (platform IN ('ios', 'android', 'web')),
    environment     text NOT NULL CHECK (environment IN ('DEV', 'PROD')),
    installation_id text CHECK (char_length(installation_id) BETWEEN 1 AND 128),
    is_enabled      boolean NOT NULL DEFAULT true,
    disabled_reason text CHECK (disabled_reason IN (
        'USER_DISABLED', 'REPLACED', 'TOKEN_REASSIGNED', 'UNREGISTERED', 'SENDER_ID_MISMATCH', 'INVALID_ARGUMENT')),
    last_seen_at    timestamptz NOT NULL DEFAULT now(),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CHECK (is_enabled = (disabled_reason IS NULL)),
    -- The device identity (docs/behaviour.md#devices), unique (owner_type, owner_id, token), through the token's hash.
    CONSTRAINT push_devices_owner_token_key UNIQUE (owner_type, owner_id, token_sha256)
);
-- Push recipients: enabled devices of these owners in this environment.
CREATE INDEX push_devices_enabled_by_owner
    ON push_devices (owner_type, owner_id, environment) WHERE is_enabled;
-- Hand-over on register: the other owners' devices holding the same token.
CREATE INDEX push_devices_by_token ON push_devices (token_sha256);
-- Rotation on register: this owner's other devices of the same app installation.
CREATE INDEX push_devices_by_installation
    ON push_devices (owner_type, owner_id, installation_id) WHERE installation_id IS NOT NULL;

CREATE TABLE push_deliveries (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    event_key        text NOT NULL CHECK (char_length(event_key) BETWEEN 1 AND 200),
    push_device_id   uuid NOT NULL REFERENCES push_devices (id) ON DELETE CASCADE,
    status           text NOT NULL CHECK (status IN ('SENDING', 'SENT', 'FAILED', 'DISABLED_TOKEN')),
    attempts         integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error       text,
    fcm_message_name text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    -- The claim: one delivery per device per event, whoever triggers it and however often.
    UNIQUE (event_key, push_device_id)
);
CREATE INDEX push_deliveries_by_device ON push_deliveries (push_device_id);

-- The shared OAuth access token for FCM, one row per service account.
CREATE TABLE fcm_access_tokens (
    client_email text PRIMARY KEY,
    access_token text NOT NULL,
    expires_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now()
);

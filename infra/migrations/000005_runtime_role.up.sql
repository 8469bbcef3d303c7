-- Least privilege (docs/deploy.md#roles). The functions, the sweep and the gateway connect as
-- `caregiver_push_runtime`, which holds exactly the rights their statements need: no DDL (it owns nothing and may
-- not create in the schema), no TRUNCATE, no REFERENCES or TRIGGER, nothing on the migration history. The role is
-- created here without LOGIN; the operator gives it a login and a password once (docs/deploy.md#roles), so that the
-- migrator never holds the functions' password.
--
-- Roles belong to the cluster, not the database: another database of the same cluster may have created it first,
-- or be creating it at this very moment.
DO $role$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'caregiver_push_runtime') THEN
        BEGIN
            CREATE ROLE caregiver_push_runtime NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;
        END;
    END IF;
END
$role$;

GRANT USAGE ON SCHEMA caregiver_push TO caregiver_push_runtime;

-- Read only: who the patient is, who may act for them, the patient's sessions (by hash) and medications.
GRANT SELECT ON patients, caregiver_patient_links, patient_sessions, medications, medication_schedule_times
    TO caregiver_push_runtime;
-- Recordings are added, never changed or removed by a function.
GRANT SELECT, INSERT ON dose_records, prn_dose_records TO caregiver_push_runtime;
-- Devices are registered, re-registered and disabled; the shared access token and key set are upserted.
GRANT SELECT, INSERT, UPDATE ON push_devices, fcm_access_tokens, jwks_cache TO caregiver_push_runtime;
-- The outbox: written by the recordings, leased and finished by the senders, pruned by the sweep.
GRANT SELECT, INSERT, UPDATE, DELETE ON push_events, push_deliveries TO caregiver_push_runtime;

-- Row level security is enabled and forced on every table of the schema by the migrator after each run (so that a
-- table a later migration forgets is closed too); with no policy a role sees no row. The runtime role sees every row
-- of the tables it works on: it serves every patient. No policy names `anon`, `authenticated` or PUBLIC.
DO $policies$
DECLARE
    name text;
BEGIN
    FOREACH name IN ARRAY ARRAY[
        'patients', 'caregiver_patient_links', 'patient_sessions', 'medications', 'medication_schedule_times',
        'dose_records', 'prn_dose_records', 'push_devices', 'push_deliveries', 'fcm_access_tokens', 'push_events',
        'jwks_cache'
    ] LOOP
        EXECUTE format(
            'CREATE POLICY caregiver_push_runtime ON caregiver_push.%I TO caregiver_push_runtime USING (true) WITH CHECK (true)',
            name);
    END LOOP;
END
$policies$;

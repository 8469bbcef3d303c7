-- The mapping an operator writes for the fixture app schema (schema.sql beside this file): one view per relation of
-- the data contract that the app owns (docs/behaviour.md#data-contract), in schema caregiver_push, over the app's
-- tables in public. The migrator runs it with search_path caregiver_push, after dropping the relations it replaces,
-- then checks it against the contract and grants the runtime role the contract's columns only.
--
-- Reads may compute (a schedule time kept as 'HH:MM' text); the two recording relations must stay simple views (one
-- table, plain columns) so that the functions can insert through them, with view defaults for what Prisma's client
-- would fill in (ids it makes, @updatedAt).
CREATE VIEW patients AS
    SELECT "id" AS id, "displayName" AS display_name FROM public."Patient";

CREATE VIEW caregiver_patient_links AS
    SELECT "caregiverId" AS caregiver_id, "patientId" AS patient_id, "revokedAt" AS revoked_at
    FROM public."CaregiverPatientLink";

CREATE VIEW patient_sessions AS
    SELECT "id" AS id, "patientId" AS patient_id, "tokenHash" AS token_hash, "expiresAt" AS expires_at,
           "revokedAt" AS revoked_at
    FROM public."PatientSession";

CREATE VIEW medications AS
    SELECT "id" AS id, "patientId" AS patient_id, "isPrn" AS is_prn, "startDate" AS start_date,
           "endDate" AS end_date, "archivedAt" AS archived_at
    FROM public."Medication";

CREATE VIEW medication_schedule_times AS
    SELECT "medicationId" AS medication_id, "time"::time AS time_of_day FROM public."MedicationSchedule";

CREATE VIEW dose_records AS
    SELECT "id" AS id, "patientId" AS patient_id, "medicationId" AS medication_id, "scheduledAt" AS scheduled_at,
           "takenAt" AS taken_at, "recordedByRole" AS recorded_by_role, "recordedById" AS recorded_by_id,
           "recordingGroupId" AS recording_group_id, "updatedAt" AS updated_at
    FROM public."DoseRecord";
ALTER VIEW dose_records ALTER COLUMN updated_at SET DEFAULT (now() AT TIME ZONE 'UTC');

CREATE VIEW prn_dose_records AS
    SELECT "id" AS id, "patientId" AS patient_id, "medicationId" AS medication_id, "takenAt" AS taken_at,
           "quantity" AS quantity, "idempotencyKey" AS idempotency_key, "requestFingerprint" AS request_fingerprint,
           "recordedByRole" AS recorded_by_role, "recordedById" AS recorded_by_id, "updatedAt" AS updated_at
    FROM public."PrnDoseRecord";
ALTER VIEW prn_dose_records ALTER COLUMN updated_at SET DEFAULT (now() AT TIME ZONE 'UTC');

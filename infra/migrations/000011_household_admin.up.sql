-- Households without an app backend (docs/deploy.md#households). A team with no backend of its own creates and manages
-- households — a patient, the caregivers linked to them, medications with their schedule times, the patient's
-- sessions — through these functions, as the role `caregiver_push_households`, never as the owner with raw SQL. Each
-- function checks its input and raises a clear error naming the field (SQLSTATE 22023 for a bad value, 23503 for an
-- id that names nothing), before it changes anything; the table constraints stay as the last word.
--
-- SECURITY DEFINER: the functions run with the rights of the schema's owner (whoever migrates), so the role needs
-- nothing on the tables — above all nothing on the push tables, which unlinking changes. Each pins `search_path` and
-- qualifies every name of the schema. The role gets EXECUTE on these functions and USAGE on the schema, nothing else.
--
-- The role is created without LOGIN, as 000005 creates the runtime role; the operator gives it a login
-- (docs/deploy.md#households). Roles belong to the cluster: another database of it may be creating this one now.
DO $role$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'caregiver_push_households') THEN
        BEGIN
            CREATE ROLE caregiver_push_households NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;
        END;
    END IF;
END
$role$;

GRANT USAGE ON SCHEMA caregiver_push TO caregiver_push_households;

-- Who may call. The migrator grants EXECUTE to the households role alone, but a project that exposes the schema to
-- Supabase's Data API by mistake grants every routine to its API roles. Inside a SECURITY DEFINER function
-- `current_user` is the owner, so the check is on the session's login: a member of the households role (or of the
-- owner) may call; PostgREST's `authenticator`, which logs in and switches to `anon` or `authenticated`, may not.
CREATE FUNCTION caregiver_push.household_check_caller(routine text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $check$
BEGIN
    IF NOT pg_catalog.pg_has_role(session_user, 'caregiver_push_households', 'MEMBER')
        AND NOT pg_catalog.pg_has_role(
            session_user,
            (SELECT n.nspowner FROM pg_catalog.pg_namespace n WHERE n.nspname = 'caregiver_push'), 'MEMBER')
    THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            MESSAGE = routine || ' is for the role caregiver_push_households';
    END IF;
END
$check$;

-- The patient exists, or 23503 naming the field.
CREATE FUNCTION caregiver_push.household_check_patient(patient uuid) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $check$
BEGIN
    IF patient IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = 'patient',
            MESSAGE = 'patient is required';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM caregiver_push.patients p WHERE p.id = patient) THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation', COLUMN = 'patient',
            MESSAGE = 'patient ' || patient::text || ' does not exist';
    END IF;
END
$check$;

-- A new patient; returns its id. `display_name` (the only patient field a push shows) is 1–50 characters, not blank.
CREATE FUNCTION caregiver_push.household_create_patient(display_name text) RETURNS uuid
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $create$
DECLARE
    created uuid;
BEGIN
    PERFORM caregiver_push.household_check_caller('household_create_patient');
    IF display_name IS NULL OR pg_catalog.btrim(display_name) = '' OR pg_catalog.char_length(display_name) > 50 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = 'display_name',
            MESSAGE = 'display_name must be 1 to 50 characters and not blank';
    END IF;
    INSERT INTO caregiver_push.patients (display_name) VALUES (display_name) RETURNING id INTO created;
    RETURN created;
END
$create$;

-- Links a caregiver (the `sub` of their Supabase Auth token) to a patient: their pushes for the patient's doses start
-- with the next recording. Linking again is harmless; linking an unlinked caregiver makes the link active again.
CREATE FUNCTION caregiver_push.household_link_caregiver(patient uuid, caregiver uuid) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $link$
BEGIN
    PERFORM caregiver_push.household_check_caller('household_link_caregiver');
    PERFORM caregiver_push.household_check_patient(patient);
    IF caregiver IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = 'caregiver',
            MESSAGE = 'caregiver is required';
    END IF;
    INSERT INTO caregiver_push.caregiver_patient_links AS l (caregiver_id, patient_id)
    VALUES (caregiver, patient)
    ON CONFLICT (caregiver_id, patient_id) DO UPDATE SET revoked_at = NULL WHERE l.revoked_at IS NOT NULL;
END
$link$;

-- Unlinks a caregiver from a patient, and stops at once what is still owed to them for the patient: returns how many
-- queued deliveries it stopped.
--
-- Recordings decide their recipients from the active links at recording time (docs/behaviour.md#outbox); what is
-- already queued for the caregiver — `PENDING`, or `SENDING` under a lease — ends `FAILED` ("caregiver unlinked
-- before sending") and its lease is dropped, so neither the sweep nor a sender whose lease this was sends it or
-- writes an outcome over it (a request already handed to FCM at this instant cannot be called back).
--
-- A recording of the patient in flight could have read the link before this commits and queue its push after: each
-- recording inserts its dose row (whose foreign key takes a KEY SHARE lock on the medication's row) in a statement
-- before the one that reads the links and queues the push. Locking the patient's medications FOR UPDATE first waits
-- for such a recording to commit (its deliveries are then stopped below) or makes it wait for this one (it then
-- reads the link as revoked).
CREATE FUNCTION caregiver_push.household_unlink_caregiver(patient uuid, caregiver uuid) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $unlink$
DECLARE
    stopped integer;
BEGIN
    PERFORM caregiver_push.household_check_caller('household_unlink_caregiver');
    PERFORM caregiver_push.household_check_patient(patient);
    IF caregiver IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = 'caregiver',
            MESSAGE = 'caregiver is required';
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM caregiver_push.caregiver_patient_links l
        WHERE l.patient_id = patient AND l.caregiver_id = caregiver
    ) THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation', COLUMN = 'caregiver',
            MESSAGE = 'caregiver ' || caregiver::text || ' is not linked to patient ' || patient::text;
    END IF;

    PERFORM 1 FROM caregiver_push.medications m WHERE m.patient_id = patient ORDER BY m.id FOR UPDATE;

    UPDATE caregiver_push.caregiver_patient_links AS l
    SET revoked_at = pg_catalog.now()
    WHERE l.patient_id = patient AND l.caregiver_id = caregiver AND l.revoked_at IS NULL;

    UPDATE caregiver_push.push_deliveries AS p
    SET status = 'FAILED', last_error = 'caregiver unlinked before sending', lease_until = NULL, lease_token = NULL,
        updated_at = pg_catalog.now()
    FROM caregiver_push.push_events AS e, caregiver_push.push_devices AS d
    WHERE e.event_key = p.event_key AND d.id = p.push_device_id
      AND e.patient_id = patient AND d.owner_type = 'CAREGIVER' AND d.owner_id = caregiver
      AND p.status IN ('PENDING', 'SENDING');
    GET DIAGNOSTICS stopped = ROW_COUNT;
    RETURN stopped;
END
$unlink$;

-- A medication of a patient with its schedule times (Tokyo wall clock, minute precision); returns its id. `name`
-- 1–200 characters, not blank (health data: it never leaves the database); `end_date` absent or on or after
-- `start_date`; a scheduled medication has 1–24 distinct times, a PRN one (`is_prn`) none.
CREATE FUNCTION caregiver_push.household_add_medication(
    patient uuid, name text, is_prn boolean, start_date date, end_date date, times time[]) RETURNS uuid
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $add$
DECLARE
    created uuid;
    listed integer := coalesce(pg_catalog.cardinality(times), 0);
BEGIN
    PERFORM caregiver_push.household_check_caller('household_add_medication');
    PERFORM caregiver_push.household_check_patient(patient);
    IF name IS NULL OR pg_catalog.btrim(name) = '' OR pg_catalog.char_length(name) > 200 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = 'name',
            MESSAGE = 'name must be 1 to 200 characters and not blank';
    END IF;
    IF is_prn IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = 'is_prn',
            MESSAGE = 'is_prn is required';
    END IF;
    IF start_date IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = 'start_date',
            MESSAGE = 'start_date is required';
    END IF;
    IF end_date < start_date THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = 'end_date',
            MESSAGE = 'end_date must be on or after start_date';
    END IF;
    IF is_prn AND listed > 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = 'times',
            MESSAGE = 'times must be empty for a PRN medication';
    END IF;
    IF NOT is_prn AND (listed NOT BETWEEN 1 AND 24 OR pg_catalog.array_ndims(times) <> 1) THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = 'times',
            MESSAGE = 'times must list 1 to 24 times of day for a scheduled medication';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.unnest(times) AS t WHERE t IS NULL OR pg_catalog.date_part('second', t) <> 0)
    THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = 'times',
            MESSAGE = 'times must be whole minutes (HH:MM), none missing';
    END IF;
    IF (SELECT pg_catalog.count(DISTINCT t) FROM pg_catalog.unnest(times) AS t) <> listed THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = 'times',
            MESSAGE = 'times must not repeat a time';
    END IF;
    INSERT INTO caregiver_push.medications (patient_id, name, is_prn, start_date, end_date)
    VALUES (patient, name, is_prn, start_date, end_date)
    RETURNING id INTO created;
    INSERT INTO caregiver_push.medication_schedule_times (medication_id, time_of_day)
    SELECT created, t FROM pg_catalog.unnest(times) AS t;
    RETURN created;
END
$add$;

-- Archives a medication: it is no longer active (docs/behaviour.md#dose-active); its records stay. Archiving again
-- changes nothing.
CREATE FUNCTION caregiver_push.household_archive_medication(medication uuid) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $archive$
BEGIN
    PERFORM caregiver_push.household_check_caller('household_archive_medication');
    IF medication IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = 'medication',
            MESSAGE = 'medication is required';
    END IF;
    UPDATE caregiver_push.medications AS m SET archived_at = pg_catalog.now()
    WHERE m.id = medication AND m.archived_at IS NULL;
    IF NOT FOUND AND NOT EXISTS (SELECT 1 FROM caregiver_push.medications m WHERE m.id = medication) THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation', COLUMN = 'medication',
            MESSAGE = 'medication ' || medication::text || ' does not exist';
    END IF;
END
$archive$;

-- A patient session for `ttl` (more than 0, at most 366 days): returns its id and the token, which is stored only as
-- the SHA-256 of its whole text (docs/behaviour.md#auth-patient) and never shown again. The token has the app's
-- shape, `pst_` and 43 base64url characters: 32 bytes, the SHA-256 of three gen_random_uuid() values (366 bits from
-- the server's strong random source; built in since PostgreSQL 13, where pgcrypto's gen_random_bytes may not be
-- installed, or not on this search_path).
CREATE FUNCTION caregiver_push.household_issue_patient_session(
    patient uuid, ttl interval, OUT session_id uuid, OUT token text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $issue$
BEGIN
    PERFORM caregiver_push.household_check_caller('household_issue_patient_session');
    PERFORM caregiver_push.household_check_patient(patient);
    IF ttl IS NULL OR pg_catalog.now() + ttl <= pg_catalog.now()
        OR pg_catalog.now() + ttl > pg_catalog.now() + interval '366 days'
    THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = 'ttl',
            MESSAGE = 'ttl must be more than 0 and at most 366 days';
    END IF;
    token := 'pst_' || pg_catalog.rtrim(pg_catalog.translate(pg_catalog.encode(pg_catalog.sha256(
        pg_catalog.uuid_send(pg_catalog.gen_random_uuid()) || pg_catalog.uuid_send(pg_catalog.gen_random_uuid())
        || pg_catalog.uuid_send(pg_catalog.gen_random_uuid())), 'base64'), '+/', '-_'), '=');
    INSERT INTO caregiver_push.patient_sessions (patient_id, token_hash, expires_at)
    VALUES (patient, pg_catalog.sha256(pg_catalog.convert_to(token, 'UTF8')), pg_catalog.now() + ttl)
    RETURNING id INTO session_id;
END
$issue$;

-- Revokes a patient session: its token is refused from the next request on. Revoking again changes nothing.
CREATE FUNCTION caregiver_push.household_revoke_patient_session(session uuid) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $revoke$
BEGIN
    PERFORM caregiver_push.household_check_caller('household_revoke_patient_session');
    IF session IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = 'session',
            MESSAGE = 'session is required';
    END IF;
    UPDATE caregiver_push.patient_sessions AS s SET revoked_at = pg_catalog.now()
    WHERE s.id = session AND s.revoked_at IS NULL;
    IF NOT FOUND AND NOT EXISTS (SELECT 1 FROM caregiver_push.patient_sessions s WHERE s.id = session) THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation', COLUMN = 'session',
            MESSAGE = 'session ' || session::text || ' does not exist';
    END IF;
END
$revoke$;

-- EXECUTE for the households role on the seven entry points; the two checks are the owner's alone (the functions
-- call them with the owner's rights). PUBLIC's default EXECUTE goes now, not only at the lockdown after the run.
REVOKE ALL ON FUNCTION
    caregiver_push.household_check_caller(text),
    caregiver_push.household_check_patient(uuid),
    caregiver_push.household_create_patient(text),
    caregiver_push.household_link_caregiver(uuid, uuid),
    caregiver_push.household_unlink_caregiver(uuid, uuid),
    caregiver_push.household_add_medication(uuid, text, boolean, date, date, time[]),
    caregiver_push.household_archive_medication(uuid),
    caregiver_push.household_issue_patient_session(uuid, interval),
    caregiver_push.household_revoke_patient_session(uuid)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    caregiver_push.household_create_patient(text),
    caregiver_push.household_link_caregiver(uuid, uuid),
    caregiver_push.household_unlink_caregiver(uuid, uuid),
    caregiver_push.household_add_medication(uuid, text, boolean, date, date, time[]),
    caregiver_push.household_archive_medication(uuid),
    caregiver_push.household_issue_patient_session(uuid, interval),
    caregiver_push.household_revoke_patient_session(uuid)
    TO caregiver_push_households;

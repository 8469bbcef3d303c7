-- A dose-record's transaction as one PL/pgSQL call (docs/decisions.md "One call per recording"): a caregiver's link,
-- the medication with whether the dose's minute is one of its schedule times, the insert, the record as stored and
-- the outbox, where the recording sent each of them as a statement of its own (find_active_link, find_medication,
-- find_schedule_time, the insert, find_dose_record, enqueue_dose_taken) in two flights. Behind a transaction pooler
-- every statement sent is parsed, analysed and planned at each call, and every PL/pgSQL call pays its SET clauses
-- and its kept plans' start-up: measured by scripts/pgbench-recording.sh, about a third of PostgreSQL's CPU per
-- recording. COMMIT stays a flight of its own, after the function has answered (PostgresConnection+Pipeline.swift:
-- a request killed before its commit leaves nothing behind).
--
-- What decides a 404 or a 422 is settled before the insert, so that a refused request writes nothing: a caregiver
-- without an active link ('not-linked'), a medication the patient does not have ('no-medication'), and the
-- medication's checks ('refused': as-needed, archived, not started or ended on the dose's Tokyo date, a date after
-- today, a minute that is not one of its schedule times). The Swift checks (DoseRecord.checkSchedule) stay the
-- authority and word the 422 from the facts returned here; the caller computes everything that depends on the clock
-- or the calendar (the dose's Tokyo date, today's, whether scheduled_at falls on a whole minute of that date, the
-- minute's time), so that this function reads no clock. A test holds the two decisions together at chosen instants.
--
-- Returns the record first — the outcome, the record as stored (this request's insert, or the one recorded before),
-- the medication's facts — with the delivery columns NULL; then, when the deliveries were written leased to the
-- recording's own sender (held_by), one row per leased delivery, in caregiver_push.leased_delivery's columns and
-- order (first, so that the sender reads them as a lease's), the record's columns NULL. Without held_by (the sweep
-- sends first) the deliveries are queued PENDING and none is returned.
--
-- The app mapping decides the type of every id and instant: they come in as text and are held in variables of the
-- mapped columns' types (%TYPE), as in migrations 000018 and 000021; the migrator makes the function anew whenever it
-- applies a mapping (AppMapping.typedFunctions). One generic plan per session, no sequential scan, hash or merge join
-- (migration 000020). SECURITY INVOKER, search_path pinned, every name qualified, EXECUTE for the runtime role only,
-- and any other caller but the owner refused before it reads a row, as the queue's functions do.
CREATE FUNCTION caregiver_push.record_dose(
    caregiver text, patient text, medication text, scheduled text, taken text, at_time time, dose_date date,
    today date, on_minute boolean, new_record text, recorder_role text, recorder text, new_event_key text,
    event_slot text, on_time boolean, event_taken_at timestamptz, stored_recorder text, acting_caregiver uuid,
    device_environment text, registration_days integer, device_cap integer, held_by uuid,
    lease_seconds double precision)
RETURNS TABLE (
    lease_delivery_id uuid, lease_device_id uuid, lease_device_token text, lease_attempts integer,
    lease_event_key text, lease_patient_id text, lease_local_date text, lease_slot text, lease_group_id text,
    lease_taken_at timestamptz, lease_within_time boolean, lease_display_name text, lease_target text,
    lease_recorded_by text, lease_language text,
    outcome text, record_id text, record_taken_at text, record_group_id text, medication_is_prn boolean,
    medication_start_date text, medication_end_date text, medication_archived boolean,
    medication_schedule_time boolean)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $record$
#variable_conflict use_column
DECLARE
    caregiver_key caregiver_push.caregiver_patient_links.caregiver_id%TYPE := caregiver;
    link_patient caregiver_push.caregiver_patient_links.patient_id%TYPE := patient;
    medication_key caregiver_push.medications.id%TYPE := medication;
    medication_patient caregiver_push.medications.patient_id%TYPE := patient;
    schedule_medication caregiver_push.medication_schedule_times.medication_id%TYPE := medication;
    record_key caregiver_push.dose_records.id%TYPE := new_record;
    record_patient caregiver_push.dose_records.patient_id%TYPE := patient;
    record_medication caregiver_push.dose_records.medication_id%TYPE := medication;
    record_scheduled caregiver_push.dose_records.scheduled_at%TYPE := scheduled;
    record_taken caregiver_push.dose_records.taken_at%TYPE := taken;
    record_role caregiver_push.dose_records.recorded_by_role%TYPE := recorder_role;
    record_recorder caregiver_push.dose_records.recorded_by_id%TYPE := recorder;
    starts date;
    ends date;
    inserted boolean;
BEGIN
    IF NOT pg_has_role(current_user, 'caregiver_push_runtime', 'USAGE')
        AND NOT pg_has_role(current_user, (SELECT nspowner FROM pg_namespace WHERE nspname = 'caregiver_push'), 'USAGE')
    THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            MESSAGE = 'record_dose is for the role caregiver_push_runtime';
    END IF;

    -- A caregiver records only for a patient it is actively linked to; a patient's own access needs no check.
    IF caregiver IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM caregiver_push.caregiver_patient_links l
        WHERE l.caregiver_id = caregiver_key AND l.patient_id = link_patient AND l.revoked_at IS NULL)
    THEN
        outcome := 'not-linked';
        RETURN NEXT;
        RETURN;
    END IF;

    SELECT m.is_prn, m.start_date::date, m.end_date::date, m.archived_at IS NOT NULL,
           EXISTS (SELECT 1 FROM caregiver_push.medication_schedule_times t
                   WHERE t.medication_id = schedule_medication AND t.time_of_day = at_time)
    INTO medication_is_prn, starts, ends, medication_archived, medication_schedule_time
    FROM caregiver_push.medications m
    WHERE m.id = medication_key AND m.patient_id = medication_patient;
    IF NOT FOUND THEN
        outcome := 'no-medication';
        RETURN NEXT;
        RETURN;
    END IF;
    medication_start_date := starts::text;
    medication_end_date := ends::text;
    IF medication_is_prn OR dose_date > today OR medication_archived OR starts > dose_date
        OR (ends IS NOT NULL AND ends < dose_date) OR NOT on_minute OR NOT medication_schedule_time
    THEN
        outcome := 'refused';
        RETURN NEXT;
        RETURN;
    END IF;

    INSERT INTO caregiver_push.dose_records
        (id, patient_id, medication_id, scheduled_at, taken_at, recorded_by_role, recorded_by_id)
    VALUES (record_key, record_patient, record_medication, record_scheduled, record_taken, record_role,
            record_recorder)
    ON CONFLICT (patient_id, medication_id, scheduled_at) DO NOTHING;
    inserted := FOUND;
    -- The record as stored: this request's, or the one recorded before it (a concurrent insert of the same dose
    -- waited for, then found here, as the statement after the insert found it).
    SELECT r.id::text, r.taken_at::text, r.recording_group_id::text
    INTO record_id, record_taken_at, record_group_id
    FROM caregiver_push.dose_records r
    WHERE r.patient_id = record_patient AND r.medication_id = record_medication AND r.scheduled_at = record_scheduled;
    outcome := CASE WHEN inserted THEN 'recorded' ELSE 'unchanged' END;
    RETURN NEXT;

    -- The push it owes, only if this call recorded the dose, and only where pushes are on (device_environment).
    IF NOT inserted OR device_environment IS NULL THEN
        RETURN;
    END IF;
    IF held_by IS NULL THEN
        PERFORM 1 FROM caregiver_push.enqueue_dose_taken(
            NULL, NULL, new_event_key, 'dose-record', patient, dose_date, event_slot, NULL, on_time, event_taken_at,
            stored_recorder, acting_caregiver, device_environment, registration_days, device_cap, NULL, 0);
        RETURN;
    END IF;
    RETURN QUERY
    SELECT q.*, NULL::text, NULL::text, NULL::text, NULL::text, NULL::boolean, NULL::text, NULL::text,
           NULL::boolean, NULL::boolean
    FROM caregiver_push.enqueue_dose_taken(
        NULL, NULL, new_event_key, 'dose-record', patient, dose_date, event_slot, NULL, on_time, event_taken_at,
        stored_recorder, acting_caregiver, device_environment, registration_days, device_cap, held_by,
        lease_seconds) q;
END
$record$;

REVOKE ALL ON FUNCTION caregiver_push.record_dose(
    text, text, text, text, text, time, date, date, boolean, text, text, text, text, text, boolean, timestamptz, text,
    uuid, text, integer, integer, uuid, double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION caregiver_push.record_dose(
    text, text, text, text, text, time, date, date, boolean, text, text, text, text, text, boolean, timestamptz, text,
    uuid, text, integer, integer, uuid, double precision) TO caregiver_push_runtime;

-- slot-bulk-record's writes as one call: each of the slot's doses inserted (a dose recorded before is left as it
-- is), and the group's push queued when any was recorded, where the recording sent one insert per dose, then the
-- outbox statement in a flight of its own (which waited for the inserts' answer). The doses come from the lock's
-- flight (find_scheduled_doses), their ids, instants and within-time flags made by the caller; the event is within
-- time only when every dose recorded now is. Returns one row per dose it recorded (record_index, 1-based, into the
-- arrays; the delivery columns NULL), then the deliveries leased to the recording's own sender (held_by) in
-- caregiver_push.leased_delivery's columns and order, record_index NULL. Typed by the app mapping as record_dose is.
CREATE FUNCTION caregiver_push.record_slot_doses(
    patient text, medications text[], scheduled text[], on_time boolean[], taken text, new_records text[],
    group_id text, recorder_role text, recorder text, new_event_key text, event_date date, event_slot text,
    event_taken_at timestamptz, stored_recorder text, acting_caregiver uuid, device_environment text,
    registration_days integer, device_cap integer, held_by uuid, lease_seconds double precision)
RETURNS TABLE (
    lease_delivery_id uuid, lease_device_id uuid, lease_device_token text, lease_attempts integer,
    lease_event_key text, lease_patient_id text, lease_local_date text, lease_slot text, lease_group_id text,
    lease_taken_at timestamptz, lease_within_time boolean, lease_display_name text, lease_target text,
    lease_recorded_by text, lease_language text, record_index integer)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $slot$
#variable_conflict use_column
DECLARE
    record_key caregiver_push.dose_records.id%TYPE;
    record_patient caregiver_push.dose_records.patient_id%TYPE := patient;
    record_medication caregiver_push.dose_records.medication_id%TYPE;
    record_scheduled caregiver_push.dose_records.scheduled_at%TYPE;
    record_taken caregiver_push.dose_records.taken_at%TYPE := taken;
    record_role caregiver_push.dose_records.recorded_by_role%TYPE := recorder_role;
    record_recorder caregiver_push.dose_records.recorded_by_id%TYPE := recorder;
    record_group caregiver_push.dose_records.recording_group_id%TYPE := group_id;
    recorded integer := 0;
    all_on_time boolean := true;
BEGIN
    IF NOT pg_has_role(current_user, 'caregiver_push_runtime', 'USAGE')
        AND NOT pg_has_role(current_user, (SELECT nspowner FROM pg_namespace WHERE nspname = 'caregiver_push'), 'USAGE')
    THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            MESSAGE = 'record_slot_doses is for the role caregiver_push_runtime';
    END IF;
    IF cardinality(medications) IS DISTINCT FROM cardinality(scheduled)
        OR cardinality(medications) IS DISTINCT FROM cardinality(on_time)
        OR cardinality(medications) IS DISTINCT FROM cardinality(new_records)
    THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'one id, instant and flag per dose';
    END IF;

    -- In the order given (the medication's, then the time's: concurrent recorders insert in the same order).
    FOR i IN 1 .. coalesce(cardinality(medications), 0) LOOP
        record_key := new_records[i];
        record_medication := medications[i];
        record_scheduled := scheduled[i];
        INSERT INTO caregiver_push.dose_records
            (id, patient_id, medication_id, scheduled_at, taken_at, recorded_by_role, recorded_by_id,
             recording_group_id)
        VALUES (record_key, record_patient, record_medication, record_scheduled, record_taken, record_role,
                record_recorder, record_group)
        ON CONFLICT (patient_id, medication_id, scheduled_at) DO NOTHING;
        IF FOUND THEN
            recorded := recorded + 1;
            all_on_time := all_on_time AND on_time[i];
            record_index := i;
            RETURN NEXT;
        END IF;
    END LOOP;
    record_index := NULL;

    IF recorded = 0 OR device_environment IS NULL THEN
        RETURN;
    END IF;
    IF held_by IS NULL THEN
        PERFORM 1 FROM caregiver_push.enqueue_dose_taken(
            NULL, NULL, new_event_key, 'slot-bulk-record', patient, event_date, event_slot, group_id, all_on_time,
            event_taken_at, stored_recorder, acting_caregiver, device_environment, registration_days, device_cap,
            NULL, 0);
        RETURN;
    END IF;
    RETURN QUERY
    SELECT q.*, NULL::integer
    FROM caregiver_push.enqueue_dose_taken(
        NULL, NULL, new_event_key, 'slot-bulk-record', patient, event_date, event_slot, group_id, all_on_time,
        event_taken_at, stored_recorder, acting_caregiver, device_environment, registration_days, device_cap,
        held_by, lease_seconds) q;
END
$slot$;

REVOKE ALL ON FUNCTION caregiver_push.record_slot_doses(
    text, text[], text[], boolean[], text, text[], text, text, text, text, date, text, timestamptz, text, uuid, text,
    integer, integer, uuid, double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION caregiver_push.record_slot_doses(
    text, text[], text[], boolean[], text, text[], text, text, text, text, date, text, timestamptz, text, uuid, text,
    integer, integer, uuid, double precision) TO caregiver_push_runtime;

-- prn-record's transaction as one call: a caregiver's link; for a request without an Idempotency-Key, the advisory
-- lock on (patient, body) that serialises its retries (lock_key; taken only with the link); the record an earlier
-- request with one of its keys made ('repeat'); the medication and its checks ('no-medication', 'refused': not
-- as-needed, archived, not started or ended on the Tokyo date of takenAt, which the caller computes); the insert
-- (ON CONFLICT on the key: another request with it committed meanwhile, its record read again, 'repeat'); the
-- record as stored ('recorded') and the outbox, where the recording sent the lock, find_prn_record and
-- find_medication, then the insert, find_prn_record again and enqueue_dose_taken, in two flights. The Swift checks
-- (PrnRecord) word the 422s and compare the fingerprints; COMMIT stays a flight of its own. Returns the record
-- first (its columns as find_prn_record's, then the medication's facts; the delivery columns NULL), then the
-- deliveries leased to the recording's own sender (held_by), as record_dose does.
CREATE FUNCTION caregiver_push.record_prn(
    caregiver text, patient text, lock_namespace integer, lock_key text, first_key text, second_key text,
    medication text, taken_date date, taken text, dose_quantity integer, stored_key text, fingerprint text,
    new_record text, recorder_role text, recorder text, new_event_key text, event_slot text,
    event_taken_at timestamptz, stored_recorder text, acting_caregiver uuid, device_environment text,
    registration_days integer, device_cap integer, held_by uuid, lease_seconds double precision)
RETURNS TABLE (
    lease_delivery_id uuid, lease_device_id uuid, lease_device_token text, lease_attempts integer,
    lease_event_key text, lease_patient_id text, lease_local_date text, lease_slot text, lease_group_id text,
    lease_taken_at timestamptz, lease_within_time boolean, lease_display_name text, lease_target text,
    lease_recorded_by text, lease_language text,
    outcome text, record_id text, record_medication_id text, record_taken_at text, record_quantity integer,
    record_fingerprint text, medication_is_prn boolean, medication_start_date text, medication_end_date text,
    medication_archived boolean)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $prn$
#variable_conflict use_column
DECLARE
    caregiver_key caregiver_push.caregiver_patient_links.caregiver_id%TYPE := caregiver;
    link_patient caregiver_push.caregiver_patient_links.patient_id%TYPE := patient;
    medication_key caregiver_push.medications.id%TYPE := medication;
    medication_patient caregiver_push.medications.patient_id%TYPE := patient;
    record_key caregiver_push.prn_dose_records.id%TYPE := new_record;
    record_patient caregiver_push.prn_dose_records.patient_id%TYPE := patient;
    record_medication caregiver_push.prn_dose_records.medication_id%TYPE := medication;
    record_taken caregiver_push.prn_dose_records.taken_at%TYPE := taken;
    record_idempotency caregiver_push.prn_dose_records.idempotency_key%TYPE := stored_key;
    key1 caregiver_push.prn_dose_records.idempotency_key%TYPE := first_key;
    key2 caregiver_push.prn_dose_records.idempotency_key%TYPE := second_key;
    record_role caregiver_push.prn_dose_records.recorded_by_role%TYPE := recorder_role;
    record_recorder caregiver_push.prn_dose_records.recorded_by_id%TYPE := recorder;
    starts date;
    ends date;
BEGIN
    IF NOT pg_has_role(current_user, 'caregiver_push_runtime', 'USAGE')
        AND NOT pg_has_role(current_user, (SELECT nspowner FROM pg_namespace WHERE nspname = 'caregiver_push'), 'USAGE')
    THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            MESSAGE = 'record_prn is for the role caregiver_push_runtime';
    END IF;

    IF caregiver IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM caregiver_push.caregiver_patient_links l
        WHERE l.caregiver_id = caregiver_key AND l.patient_id = link_patient AND l.revoked_at IS NULL)
    THEN
        outcome := 'not-linked';
        RETURN NEXT;
        RETURN;
    END IF;
    -- A keyless request waits here for another with the same body, then finds its record (a new snapshot).
    IF lock_key IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock(lock_namespace, hashtext(lock_key));
    END IF;

    SELECT r.id::text, r.medication_id::text, r.taken_at::text, r.quantity::integer, r.request_fingerprint::text
    INTO record_id, record_medication_id, record_taken_at, record_quantity, record_fingerprint
    FROM caregiver_push.prn_dose_records r
    WHERE r.patient_id = record_patient AND r.idempotency_key IN (key1, key2)
    ORDER BY r.taken_at DESC, r.id
    LIMIT 1;
    IF FOUND THEN
        outcome := 'repeat';
        RETURN NEXT;
        RETURN;
    END IF;

    SELECT m.is_prn, m.start_date::date, m.end_date::date, m.archived_at IS NOT NULL
    INTO medication_is_prn, starts, ends, medication_archived
    FROM caregiver_push.medications m
    WHERE m.id = medication_key AND m.patient_id = medication_patient;
    IF NOT FOUND THEN
        outcome := 'no-medication';
        RETURN NEXT;
        RETURN;
    END IF;
    medication_start_date := starts::text;
    medication_end_date := ends::text;
    IF NOT medication_is_prn OR medication_archived OR starts > taken_date
        OR (ends IS NOT NULL AND ends < taken_date)
    THEN
        outcome := 'refused';
        RETURN NEXT;
        RETURN;
    END IF;

    INSERT INTO caregiver_push.prn_dose_records AS r
        (id, patient_id, medication_id, taken_at, quantity, idempotency_key, request_fingerprint, recorded_by_role,
         recorded_by_id)
    VALUES (record_key, record_patient, record_medication, record_taken, dose_quantity, record_idempotency,
            fingerprint, record_role, record_recorder)
    ON CONFLICT (patient_id, idempotency_key) DO NOTHING
    RETURNING r.id::text, r.medication_id::text, r.taken_at::text, r.quantity::integer, r.request_fingerprint::text
    INTO record_id, record_medication_id, record_taken_at, record_quantity, record_fingerprint;
    IF NOT FOUND THEN
        -- Another request with this key committed between the look-up and the insert: its record.
        SELECT r.id::text, r.medication_id::text, r.taken_at::text, r.quantity::integer, r.request_fingerprint::text
        INTO record_id, record_medication_id, record_taken_at, record_quantity, record_fingerprint
        FROM caregiver_push.prn_dose_records r
        WHERE r.patient_id = record_patient AND r.idempotency_key IN (key1, key2)
        ORDER BY r.taken_at DESC, r.id
        LIMIT 1;
        outcome := 'repeat';
        RETURN NEXT;
        RETURN;
    END IF;
    outcome := 'recorded';
    RETURN NEXT;

    IF device_environment IS NULL THEN
        RETURN;
    END IF;
    IF held_by IS NULL THEN
        PERFORM 1 FROM caregiver_push.enqueue_dose_taken(
            NULL, NULL, new_event_key, 'prn-record', patient, taken_date, event_slot, NULL, false, event_taken_at,
            stored_recorder, acting_caregiver, device_environment, registration_days, device_cap, NULL, 0);
        RETURN;
    END IF;
    RETURN QUERY
    SELECT q.*, NULL::text, NULL::text, NULL::text, NULL::text, NULL::integer, NULL::text, NULL::boolean,
           NULL::text, NULL::text, NULL::boolean
    FROM caregiver_push.enqueue_dose_taken(
        NULL, NULL, new_event_key, 'prn-record', patient, taken_date, event_slot, NULL, false, event_taken_at,
        stored_recorder, acting_caregiver, device_environment, registration_days, device_cap, held_by,
        lease_seconds) q;
END
$prn$;

REVOKE ALL ON FUNCTION caregiver_push.record_prn(
    text, text, integer, text, text, text, text, date, text, integer, text, text, text, text, text, text, text,
    timestamptz, text, uuid, text, integer, integer, uuid, double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION caregiver_push.record_prn(
    text, text, integer, text, text, text, text, date, text, integer, text, text, text, text, text, text, text,
    timestamptz, text, uuid, text, integer, integer, uuid, double precision) TO caregiver_push_runtime;

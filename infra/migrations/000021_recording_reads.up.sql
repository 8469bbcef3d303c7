-- The recording's reads as PL/pgSQL calls (docs/decisions.md "The recording's reads keep their plans"), as the
-- queue's statements became in migrations 000017 and 000018: a patient's session (every request a patient's token
-- makes), a caregiver's active link (every recording a caregiver makes), a medication and whether a minute is one of
-- its schedule times (dose-record, prn-record), the dose recorded for a scheduled instant (dose-record), a patient's
-- scheduled doses on a date (slot-bulk-record) and the PRN record an idempotency key made (prn-record). Sent as
-- statements over a transaction pooler (no named prepared statement survives it), PostgreSQL parsed and planned each
-- one again at every request, and for these look-ups by key planning cost several times what running them did.
-- PL/pgSQL keeps each plan for the server connection's life, whoever uses it next.
--
-- Each returns exactly what the statement it replaces returned, column by column, as text where the app mapping
-- decides the type (ids, instants): the columns' own text, as the statement sent it. Arguments whose column type the
-- mapping decides come in as text and are held in variables of the mapped columns' types (%TYPE), so that every
-- comparison is the column's own and served by its key; text a column type cannot hold raises the error the
-- statement raised (22P02, read as "no such patient or medication"). The migrator makes the functions anew whenever
-- it applies a mapping (AppMapping.recompileTypedFunctions).
--
-- One generic plan per session (plan_cache_mode), and no sequential scan, hash or merge join in it (as migration
-- 000020 settles for the queue functions): each row is found by its key whatever the tables' sizes were when the
-- session planned.
--
-- SECURITY INVOKER, STABLE, search_path pinned and every name qualified. They read only what the caller may read:
-- through them, as directly, a role without the runtime role's grants and row-security policy reads nothing, so
-- they need no refusal of other callers of their own (the queue's functions, which write, have one). EXECUTE is
-- revoked from PUBLIC and granted to the runtime role (the migrator also revokes every routine from the API roles).

-- at_instant is the request's instant as the functions send every instant (RFC 3339, UTC), and is read as the
-- mapped column's type: a timestamp without time zone takes it as UTC, as the statement's untyped parameter did,
-- whatever the session's TimeZone.
CREATE FUNCTION caregiver_push.find_patient_session(session_token_hash bytea, at_instant text)
RETURNS TABLE (session_id text, session_patient_id text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $session$
#variable_conflict use_column
DECLARE
    wanted caregiver_push.patient_sessions.token_hash%TYPE := session_token_hash;
    expires_after caregiver_push.patient_sessions.expires_at%TYPE := at_instant;
BEGIN
    RETURN QUERY
    SELECT s.id::text, s.patient_id::text FROM caregiver_push.patient_sessions s
    WHERE s.token_hash = wanted AND s.revoked_at IS NULL AND s.expires_at > expires_after;
END
$session$;

-- A row (1) when the caregiver's link to the patient is active; none otherwise. A slot's recording takes its
-- advisory lock in the same statement, once per row this returns: never without the link.
CREATE FUNCTION caregiver_push.find_active_link(caregiver text, patient text)
RETURNS SETOF integer
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $link$
#variable_conflict use_column
DECLARE
    caregiver_key caregiver_push.caregiver_patient_links.caregiver_id%TYPE := caregiver;
    patient_key caregiver_push.caregiver_patient_links.patient_id%TYPE := patient;
BEGIN
    RETURN QUERY
    SELECT 1 FROM caregiver_push.caregiver_patient_links l
    WHERE l.caregiver_id = caregiver_key AND l.patient_id = patient_key AND l.revoked_at IS NULL;
END
$link$;

CREATE FUNCTION caregiver_push.find_medication(medication text, patient text)
RETURNS TABLE (medication_is_prn boolean, medication_start_date text, medication_end_date text,
               medication_archived boolean)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $medication$
#variable_conflict use_column
DECLARE
    wanted caregiver_push.medications.id%TYPE := medication;
    patient_key caregiver_push.medications.patient_id%TYPE := patient;
BEGIN
    RETURN QUERY
    SELECT m.is_prn, m.start_date::date::text, m.end_date::date::text, m.archived_at IS NOT NULL
    FROM caregiver_push.medications m
    WHERE m.id = wanted AND m.patient_id = patient_key;
END
$medication$;

-- A row (1) when at_time is one of the medication's schedule times; none otherwise.
CREATE FUNCTION caregiver_push.find_schedule_time(medication text, at_time time)
RETURNS SETOF integer
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $schedule_time$
#variable_conflict use_column
DECLARE
    wanted caregiver_push.medication_schedule_times.medication_id%TYPE := medication;
BEGIN
    RETURN QUERY
    SELECT 1 FROM caregiver_push.medication_schedule_times t
    WHERE t.medication_id = wanted AND t.time_of_day = at_time;
END
$schedule_time$;

-- The dose recorded for the patient's medication at scheduled_at (an instant as the functions send it, read as the
-- mapped column's type): this request's insert, or the one recorded before it.
CREATE FUNCTION caregiver_push.find_dose_record(patient text, medication text, scheduled_at text)
RETURNS TABLE (record_id text, record_taken_at text, record_group_id text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $dose$
#variable_conflict use_column
DECLARE
    patient_key caregiver_push.dose_records.patient_id%TYPE := patient;
    medication_key caregiver_push.dose_records.medication_id%TYPE := medication;
    scheduled caregiver_push.dose_records.scheduled_at%TYPE := scheduled_at;
BEGIN
    RETURN QUERY
    SELECT r.id::text, r.taken_at::text, r.recording_group_id::text FROM caregiver_push.dose_records r
    WHERE r.patient_id = patient_key AND r.medication_id = medication_key AND r.scheduled_at = scheduled;
END
$dose$;

-- The patient's active, scheduled (non-PRN) medications on on_date with their schedule times as minutes of the day,
-- ordered by medication (in its own type's order) and time, so that concurrent recorders insert in the same order.
CREATE FUNCTION caregiver_push.find_scheduled_doses(patient text, on_date date)
RETURNS TABLE (dose_medication_id text, dose_minute_of_day integer)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $doses$
#variable_conflict use_column
DECLARE
    patient_key caregiver_push.medications.patient_id%TYPE := patient;
BEGIN
    RETURN QUERY
    SELECT m.id::text, (extract(hour FROM t.time_of_day) * 60 + extract(minute FROM t.time_of_day))::integer
    FROM caregiver_push.medications m
    JOIN caregiver_push.medication_schedule_times t ON t.medication_id = m.id
    WHERE m.patient_id = patient_key AND m.archived_at IS NULL AND NOT m.is_prn
      AND m.start_date <= on_date AND (m.end_date IS NULL OR m.end_date >= on_date)
    ORDER BY m.id, t.time_of_day;
END
$doses$;

-- The record an earlier request with either key made for the patient, with its fingerprint: the latest, when both
-- keys found one.
CREATE FUNCTION caregiver_push.find_prn_record(patient text, first_key text, second_key text)
RETURNS TABLE (record_id text, record_medication_id text, record_taken_at text, record_quantity integer,
               record_fingerprint text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $prn$
#variable_conflict use_column
DECLARE
    patient_key caregiver_push.prn_dose_records.patient_id%TYPE := patient;
    key1 caregiver_push.prn_dose_records.idempotency_key%TYPE := first_key;
    key2 caregiver_push.prn_dose_records.idempotency_key%TYPE := second_key;
BEGIN
    RETURN QUERY
    SELECT r.id::text, r.medication_id::text, r.taken_at::text, r.quantity::integer, r.request_fingerprint::text
    FROM caregiver_push.prn_dose_records r
    WHERE r.patient_id = patient_key AND r.idempotency_key IN (key1, key2)
    ORDER BY r.taken_at DESC, r.id
    LIMIT 1;
END
$prn$;

REVOKE ALL ON FUNCTION caregiver_push.find_patient_session(bytea, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION caregiver_push.find_patient_session(bytea, text) TO caregiver_push_runtime;
REVOKE ALL ON FUNCTION caregiver_push.find_active_link(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION caregiver_push.find_active_link(text, text) TO caregiver_push_runtime;
REVOKE ALL ON FUNCTION caregiver_push.find_dose_record(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION caregiver_push.find_dose_record(text, text, text) TO caregiver_push_runtime;
REVOKE ALL ON FUNCTION caregiver_push.find_medication(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION caregiver_push.find_medication(text, text) TO caregiver_push_runtime;
REVOKE ALL ON FUNCTION caregiver_push.find_schedule_time(text, time) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION caregiver_push.find_schedule_time(text, time) TO caregiver_push_runtime;
REVOKE ALL ON FUNCTION caregiver_push.find_scheduled_doses(text, date) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION caregiver_push.find_scheduled_doses(text, date) TO caregiver_push_runtime;
REVOKE ALL ON FUNCTION caregiver_push.find_prn_record(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION caregiver_push.find_prn_record(text, text, text) TO caregiver_push_runtime;

-- The recording's outbox statement as a PL/pgSQL call (docs/decisions.md "The queue's statements keep their plans"),
-- as the lease and the outcomes became in migration 000017: sent as a statement inside every recording
-- transaction, it was planned again at every recording, and its planning cost more than running it. The statement is
-- the one PushOutbox.enqueueQuery sent (docs/behaviour.md#outbox): it writes the event (or merges the recording into
-- the event it joins), reopens what was sent from an older revision, and queues one delivery per recipient, leased to
-- the recording's own sender under held_by when given; it returns the leased rows (or, without held_by, every row
-- it queued) as caregiver_push.leased_delivery rows, as lease_push_deliveries does.
--
-- The app mapping decides the type of the patient's and the records' ids (text, a UUID, a cuid): they come in as
-- text and are held in variables of the mapped columns' types (%TYPE, resolved when a session first runs the
-- function), so that every comparison is the column's own and is served by its key. The migrator makes the
-- function anew whenever it applies a mapping, so that no session keeps the types of the last one.
--
-- Whether the event is owed at all: the recording's row exists (recorded_kind 'dose' or 'prn' with its id: the
-- insert before it in the same transaction did not find the record there already), or always (recorded_kind NULL).
-- The check is a statement of its own; it reads the transaction's own insert either way.
--
-- SECURITY INVOKER, search_path pinned, EXECUTE for the runtime role only, and any other caller but the owner refused:
-- as migrations 000009 and 000017.
CREATE FUNCTION caregiver_push.enqueue_dose_taken(
    recorded_kind text, recorded_id text, new_event_key text, recording_source text, patient text,
    event_date date, event_slot text, group_id text, on_time boolean, event_taken_at timestamptz,
    recorder text, acting_caregiver uuid, device_environment text, registration_days integer,
    device_cap integer, held_by uuid, lease_seconds double precision)
RETURNS SETOF caregiver_push.leased_delivery
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $outbox$
#variable_conflict use_column
DECLARE
    event_patient caregiver_push.push_events.patient_id%TYPE;
    linked_patient caregiver_push.caregiver_patient_links.patient_id%TYPE;
    dose_id caregiver_push.dose_records.id%TYPE;
    prn_id caregiver_push.prn_dose_records.id%TYPE;
BEGIN
    IF NOT pg_has_role(current_user, 'caregiver_push_runtime', 'USAGE')
        AND NOT pg_has_role(current_user, (SELECT nspowner FROM pg_namespace WHERE nspname = 'caregiver_push'), 'USAGE')
    THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            MESSAGE = 'enqueue_dose_taken is for the role caregiver_push_runtime';
    END IF;

    IF recorded_kind = 'dose' THEN
        dose_id := recorded_id;
        IF NOT EXISTS (SELECT 1 FROM caregiver_push.dose_records r WHERE r.id = dose_id) THEN
            RETURN;
        END IF;
    ELSIF recorded_kind = 'prn' THEN
        prn_id := recorded_id;
        IF NOT EXISTS (SELECT 1 FROM caregiver_push.prn_dose_records r WHERE r.id = prn_id) THEN
            RETURN;
        END IF;
    ELSIF recorded_kind IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'recorded_kind is dose, prn or NULL';
    END IF;
    event_patient := patient;
    linked_patient := patient;

    RETURN QUERY
    WITH event AS (
        INSERT INTO caregiver_push.push_events AS e
            (event_key, kind, source, patient_id, local_date, slot, recording_group_id, within_time, taken_at,
             recorded_by)
        VALUES (new_event_key, 'DOSE_TAKEN', recording_source, event_patient, event_date, event_slot, group_id,
                on_time, event_taken_at, recorder)
        ON CONFLICT (event_key) DO UPDATE
            SET within_time = e.within_time AND excluded.within_time,
                recorded_by = CASE WHEN e.recorded_by = excluded.recorded_by THEN e.recorded_by ELSE 'BOTH' END,
                revision = e.revision + CASE
                    WHEN (e.within_time AND NOT excluded.within_time)
                      OR (e.recorded_by = 'CAREGIVER' AND excluded.recorded_by <> 'CAREGIVER') THEN 1 ELSE 0 END
        RETURNING e.event_key, e.patient_id, e.local_date, e.slot, e.recording_group_id, e.taken_at,
                  e.within_time, e.recorded_by, e.revision
    ), reopened AS (
        -- Only once revised: what was sent (or is being sent) from an older revision is owed again. The event's
        -- PENDING rows are rewritten unchanged, which holds their locks until COMMIT: a lease that would word them
        -- from the older revision skips them meanwhile.
        UPDATE caregiver_push.push_deliveries p
        SET status = 'PENDING',
            attempts = CASE WHEN p.status = 'PENDING' THEN p.attempts ELSE 0 END,
            next_attempt_at = CASE WHEN p.status = 'PENDING' THEN p.next_attempt_at ELSE now() END,
            lease_until = NULL, lease_token = NULL, updated_at = now()
        FROM event
        WHERE event.revision > 1 AND p.event_key = new_event_key
          AND p.status IN ('PENDING', 'SENDING', 'SENT') AND p.sent_revision IS DISTINCT FROM event.revision
    ), holder AS (
        -- The lease the new rows are written under: none for an event revised before (its older rows are owed
        -- again, and the sender leases them all by the event), nor when the caller leases later.
        SELECT CASE WHEN event.revision = 1 THEN held_by END AS token FROM event
    ), recipients AS (
        SELECT d.id
        FROM holder, caregiver_push.caregiver_patient_links l
        CROSS JOIN LATERAL (
            SELECT v.id FROM caregiver_push.push_devices v
            WHERE v.owner_type = 'CAREGIVER' AND v.owner_id = l.caregiver_id
              AND v.environment = device_environment AND v.is_enabled
              AND v.last_seen_at > now() - make_interval(days => registration_days)
            ORDER BY v.last_seen_at DESC, v.id
            LIMIT device_cap
        ) d
        WHERE l.patient_id = linked_patient AND l.revoked_at IS NULL
          AND l.caregiver_id IS DISTINCT FROM acting_caregiver
    ), queued AS (
        INSERT INTO caregiver_push.push_deliveries AS p
            (event_key, push_device_id, status, next_attempt_at, attempts, lease_token, lease_until, sent_revision)
        SELECT new_event_key, r.id, CASE WHEN holder.token IS NULL THEN 'PENDING' ELSE 'SENDING' END,
               now(), CASE WHEN holder.token IS NULL THEN 0 ELSE 1 END, holder.token,
               CASE WHEN holder.token IS NOT NULL THEN now() + make_interval(secs => lease_seconds) END,
               CASE WHEN holder.token IS NOT NULL THEN 1 END
        FROM holder, recipients r
        ON CONFLICT (event_key, push_device_id) DO NOTHING
        RETURNING p.id, p.push_device_id, p.attempts, p.status
    )
    -- The lease's columns, in its order. Each queued row finds its device by key: one plan serves every call
    -- (plan_cache_mode), so no join here may depend on how many rows the call has — a join of the queued rows with
    -- the recipients, estimated at a row or two, was a nested loop over both, quadratic in a caregiver's devices.
    SELECT q.id, d.id, d.token::text, q.attempts, e.event_key, e.patient_id::text, e.local_date::text, e.slot,
           e.recording_group_id, e.taken_at, e.within_time,
           (SELECT pt.display_name::text FROM caregiver_push.patients pt WHERE pt.id = e.patient_id), d.target,
           e.recorded_by, d.language
    FROM queued q JOIN caregiver_push.push_devices d ON d.id = q.push_device_id, event e
    WHERE q.status = 'SENDING' OR held_by IS NULL;
END
$outbox$;

REVOKE ALL ON FUNCTION caregiver_push.enqueue_dose_taken(
    text, text, text, text, text, date, text, text, boolean, timestamptz, text, uuid, text, integer, integer, uuid,
    double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION caregiver_push.enqueue_dose_taken(
    text, text, text, text, text, date, text, text, boolean, timestamptz, text, uuid, text, integer, integer, uuid,
    double precision) TO caregiver_push_runtime;

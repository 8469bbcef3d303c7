-- The queue's two busiest statements as PL/pgSQL calls (docs/decisions.md "The queue's statements keep their plans"):
-- the lease (DeliveryQueue.lease: push-sweep, and a sender taking a revised event's rows) and the outcomes
-- (DeliveryQueue.record: after every send). Sent as statements, PostgreSQL parsed and planned each of them again at
-- every call, and planning cost more than running them (the load section of docs/benchmarks.md lists the
-- statements by their total time). Behind a transaction pooler the functions may not keep a named prepared
-- statement; PL/pgSQL keeps each statement's plan for the life of the server connection, whoever uses it next, and
-- a plan that a later migration or mapping invalidates is made again.
--
-- Neither takes a parameter whose type follows the app mapping: the patient's id and name are returned as text.
-- Each forces its generic plan (one plan for every call): the custom plans they would otherwise try first plan the
-- statement again at each call, which is what this saves; the generic plans are the ones the statements had (the
-- due index, then the keys).
--
-- SECURITY INVOKER (the default): they run with the caller's rights and row security. The search_path is pinned and
-- every name qualified. The migrator revokes every routine of the schema from PUBLIC and the API roles after each
-- run; only the runtime role is granted EXECUTE, and each refuses any other caller but the owner (as
-- register_push_device does, migration 000009).

-- A leased delivery as the senders read it (DeliveryQueue.leased, column by column): what the lease returns, and what
-- the recording's outbox returns of the deliveries it writes already leased (migration 000018). The patient's id and
-- name are text whatever the app mapping makes them.
CREATE TYPE caregiver_push.leased_delivery AS (
    delivery_id uuid, device_id uuid, device_token text, delivery_attempts integer, event_key text,
    patient_id text, local_date text, slot text, recording_group_id text, taken_at timestamptz,
    within_time boolean, display_name text, target text, recorded_by text, language text);

-- Leases due deliveries — PENDING past next_attempt_at, or SENDING past lease_until — whose device is still enabled,
-- whose owner is still linked to the event's patient, and whose event is younger than max_age_seconds: of one event
-- (event_key) or of any (NULL), the longest due first (push_deliveries_due), at most lease_limit. They become SENDING
-- under held_by until lease_seconds from now, their attempts counted.
CREATE FUNCTION caregiver_push.lease_push_deliveries(
    of_event text, held_by uuid, lease_limit integer, max_age_seconds integer, lease_seconds double precision)
RETURNS SETOF caregiver_push.leased_delivery
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $lease$
#variable_conflict use_column
BEGIN
    IF NOT pg_has_role(current_user, 'caregiver_push_runtime', 'USAGE')
        AND NOT pg_has_role(current_user, (SELECT nspowner FROM pg_namespace WHERE nspname = 'caregiver_push'), 'USAGE')
    THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            MESSAGE = 'lease_push_deliveries is for the role caregiver_push_runtime';
    END IF;

    RETURN QUERY
    WITH due AS (
        -- Each due row finds its event, its device, its patient's name and its link by key: one plan serves every
        -- call (plan_cache_mode), so none of these look-ups may depend on how many rows are due or how large the
        -- tables were when the plan was made. A join the planner is free to reorder was, in the plan it kept, a hash
        -- of every link rebuilt for each due row; a LATERAL with OFFSET 0 and a sub-select with LIMIT 1 stay
        -- look-ups by key, row by row.
        SELECT p.id, d.id AS device_id, d.token, d.target, d.language, e.event_key, e.patient_id,
               e.local_date, e.slot, e.recording_group_id, e.taken_at, e.within_time, e.recorded_by,
               e.revision, (SELECT pt.display_name FROM caregiver_push.patients pt WHERE pt.id = e.patient_id)
                   AS display_name
        FROM caregiver_push.push_deliveries p
        CROSS JOIN LATERAL (
            SELECT x.event_key, x.patient_id, x.local_date, x.slot, x.recording_group_id, x.taken_at, x.within_time,
                   x.recorded_by, x.revision
            FROM caregiver_push.push_events x
            WHERE x.event_key = p.event_key AND x.created_at > now() - make_interval(secs => max_age_seconds)
            OFFSET 0
        ) e
        CROSS JOIN LATERAL (
            SELECT v.id, v.token, v.target, v.language, v.owner_id
            FROM caregiver_push.push_devices v
            WHERE v.id = p.push_device_id AND v.is_enabled
            OFFSET 0
        ) d
        WHERE (of_event IS NULL OR p.event_key = of_event)
          AND p.status IN ('PENDING', 'SENDING')
          AND (CASE WHEN p.status = 'PENDING' THEN p.next_attempt_at ELSE p.lease_until END) <= now()
          AND (SELECT true FROM caregiver_push.caregiver_patient_links l
               WHERE l.caregiver_id = d.owner_id AND l.patient_id = e.patient_id AND l.revoked_at IS NULL
               LIMIT 1)
        ORDER BY (CASE WHEN p.status = 'PENDING' THEN p.next_attempt_at ELSE p.lease_until END)
        LIMIT lease_limit
        FOR UPDATE OF p SKIP LOCKED
    )
    -- What the lease sends is joined once, in `due`: the update finds its rows by id alone.
    UPDATE caregiver_push.push_deliveries p
    SET status = 'SENDING', attempts = p.attempts + 1, lease_token = held_by,
        lease_until = now() + make_interval(secs => lease_seconds), updated_at = now(),
        sent_revision = due.revision
    FROM due
    WHERE p.id = due.id
    RETURNING p.id, due.device_id, due.token::text, p.attempts, due.event_key, due.patient_id::text,
              due.local_date::text, due.slot, due.recording_group_id, due.taken_at, due.within_time,
              due.display_name::text, due.target, due.recorded_by, due.language;
END
$lease$;

-- Records the outcomes of a lease's sends and disables the devices whose tokens were found dead, in one call: one
-- row per delivery in the outcome arrays (same length, same order), one per dead device in the last two. Only rows
-- still held by held_by change (a sender whose lease ran out cannot overwrite the outcome of the one that took
-- over). A message sent from an older revision of its event than the event's now is not SENT but owed again, due
-- now. Returns how many deliveries changed.
CREATE FUNCTION caregiver_push.record_push_outcomes(
    held_by uuid, delivery_ids uuid[], outcome_statuses text[], outcome_attempts integer[], outcome_errors text[],
    message_names text[], retry_delays_ms bigint[], dead_devices uuid[], dead_reasons text[])
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $outcomes$
#variable_conflict use_column
DECLARE
    updated integer;
BEGIN
    IF NOT pg_has_role(current_user, 'caregiver_push_runtime', 'USAGE')
        AND NOT pg_has_role(current_user, (SELECT nspowner FROM pg_namespace WHERE nspname = 'caregiver_push'), 'USAGE')
    THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            MESSAGE = 'record_push_outcomes is for the role caregiver_push_runtime';
    END IF;

    UPDATE caregiver_push.push_deliveries p
    SET status = CASE WHEN o.status = 'SENT' AND p.sent_revision < e.revision THEN 'PENDING' ELSE o.status END,
        attempts = CASE WHEN o.status = 'SENT' AND p.sent_revision < e.revision THEN 0 ELSE o.attempts END,
        last_error = o.last_error, fcm_message_name = o.message_name,
        next_attempt_at = CASE
            WHEN o.status = 'SENT' AND p.sent_revision < e.revision THEN now()
            WHEN o.status = 'PENDING' THEN now() + make_interval(secs => o.delay_ms / 1000.0)
            ELSE p.next_attempt_at END,
        lease_until = NULL, lease_token = NULL, updated_at = now()
    FROM unnest(delivery_ids, outcome_statuses, outcome_attempts, outcome_errors, message_names, retry_delays_ms)
            AS o(id, status, attempts, last_error, message_name, delay_ms),
         caregiver_push.push_events e
    -- Held by this lease: its token and a lease time, which push_deliveries_lease_check allows on SENDING rows only.
    -- Said so rather than as status = 'SENDING', which the partial indexes on SENDING rows would answer: one plan
    -- serves every call (plan_cache_mode), and it must find each outcome's row by its id, however many rows are
    -- being sent.
    WHERE p.id = o.id AND p.lease_token = held_by AND p.lease_until IS NOT NULL
      AND e.event_key = p.event_key;
    GET DIAGNOSTICS updated = ROW_COUNT;

    IF cardinality(dead_devices) > 0 THEN
        UPDATE caregiver_push.push_devices d
        SET is_enabled = false, disabled_reason = o.reason, updated_at = now()
        FROM unnest(dead_devices, dead_reasons) AS o(device, reason)
        WHERE d.id = o.device AND d.is_enabled;
    END IF;
    RETURN updated;
END
$outcomes$;

REVOKE ALL ON FUNCTION caregiver_push.lease_push_deliveries(text, uuid, integer, integer, double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION caregiver_push.lease_push_deliveries(text, uuid, integer, integer, double precision)
    TO caregiver_push_runtime;
REVOKE ALL ON FUNCTION caregiver_push.record_push_outcomes(
    uuid, uuid[], text[], integer[], text[], text[], bigint[], uuid[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION caregiver_push.record_push_outcomes(
    uuid, uuid[], text[], integer[], text[], text[], bigint[], uuid[], text[]) TO caregiver_push_runtime;

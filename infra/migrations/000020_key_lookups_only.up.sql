-- The queue functions plan once per server session (plan_cache_mode = force_generic_plan, 000017 and 000018), from
-- the statistics of that moment, and every statement in them is a look-up by key. Under make bench's load the plans
-- they kept were not: the outcomes' UPDATE hashed a sequential scan of a queue table at every call, and the foreign
-- key checks and the patient's name that the outbox's inserts run inside the call scanned patients whole (a plan made
-- while a table was small, or a generic estimate of 100 outcomes against a table of a few thousand rows). Inside
-- these functions the planner may use neither a sequential scan where an index serves nor a hash or merge join
-- (their cost is set prohibitive, so what has no index still runs): each row is found by its key, whatever the
-- tables' sizes were when the session planned. The settings hold only while a function runs.
ALTER FUNCTION caregiver_push.enqueue_dose_taken(
    text, text, text, text, text, date, text, text, boolean, timestamptz, text, uuid, text, integer, integer, uuid,
    double precision) SET enable_seqscan = off;
ALTER FUNCTION caregiver_push.enqueue_dose_taken(
    text, text, text, text, text, date, text, text, boolean, timestamptz, text, uuid, text, integer, integer, uuid,
    double precision) SET enable_hashjoin = off;
ALTER FUNCTION caregiver_push.enqueue_dose_taken(
    text, text, text, text, text, date, text, text, boolean, timestamptz, text, uuid, text, integer, integer, uuid,
    double precision) SET enable_mergejoin = off;
ALTER FUNCTION caregiver_push.lease_push_deliveries(text, uuid, integer, integer, double precision)
    SET enable_seqscan = off;
ALTER FUNCTION caregiver_push.lease_push_deliveries(text, uuid, integer, integer, double precision)
    SET enable_hashjoin = off;
ALTER FUNCTION caregiver_push.lease_push_deliveries(text, uuid, integer, integer, double precision)
    SET enable_mergejoin = off;
ALTER FUNCTION caregiver_push.record_push_outcomes(uuid, uuid[], text[], integer[], text[], text[], bigint[], uuid[], text[])
    SET enable_seqscan = off;
ALTER FUNCTION caregiver_push.record_push_outcomes(uuid, uuid[], text[], integer[], text[], text[], bigint[], uuid[], text[])
    SET enable_hashjoin = off;
ALTER FUNCTION caregiver_push.record_push_outcomes(uuid, uuid[], text[], integer[], text[], text[], bigint[], uuid[], text[])
    SET enable_mergejoin = off;

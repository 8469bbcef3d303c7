-- The project's own schema (docs/deploy.md#the-database). Every object lives in `caregiver_push`, never in `public`:
-- a Supabase project serves `public` through its Data API, and an application's own `patients` or `medications` there
-- must not collide with these.
--
-- The migrator creates the schema and applies every migration with `search_path` pinned to it, so on a new database
-- the first three migrations already created their tables here and this one changes nothing. A deployment made before
-- the schema existed has them in `public` (the migrator has just moved its history table over): they move here with
-- their rows, indexes, constraints and foreign keys. A table moves only when `public` holds it and this schema does
-- not — on a database migrated anew, a `public.patients` of someone else's is never touched.
DO $move$
DECLARE
    name text;
BEGIN
    FOREACH name IN ARRAY ARRAY[
        'patients', 'caregiver_patient_links', 'patient_sessions', 'medications', 'medication_schedule_times',
        'dose_records', 'prn_dose_records', 'push_devices', 'push_deliveries', 'fcm_access_tokens', 'push_events',
        'jwks_cache'
    ] LOOP
        IF to_regclass(format('public.%I', name)) IS NOT NULL
            AND to_regclass(format('caregiver_push.%I', name)) IS NULL THEN
            EXECUTE format('ALTER TABLE public.%I SET SCHEMA caregiver_push', name);
        END IF;
    END LOOP;
END
$move$;

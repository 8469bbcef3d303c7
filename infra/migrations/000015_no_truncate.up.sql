-- TRUNCATE passes row level security by design: a role granted TRUNCATE on a table empties it whatever its policies
-- say. No role but a table's owner has the privilege here, but Supabase's steps for exposing a schema to its Data API
-- grant ALL (TRUNCATE with it) to anon, authenticated and service_role, and they hold it until the migrator's
-- lockdown next runs. This trigger, on every table of the schema (the lockdown adds it to each new one), refuses a
-- TRUNCATE by any role that is not a member of the table's owner (a superuser is a member of every role).
CREATE FUNCTION caregiver_push.refuse_truncate() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $refuse$
BEGIN
    IF NOT pg_catalog.pg_has_role(
        current_user, (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID), 'USAGE')
    THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            MESSAGE = 'only the owner of ' || TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME || ' may truncate it';
    END IF;
    RETURN NULL;
END
$refuse$;

REVOKE ALL ON FUNCTION caregiver_push.refuse_truncate() FROM PUBLIC;

-- With an app mapping (docs/deploy.md#bring-your-own-tables) the households are the app's: `patients` is then a view
-- over the app's own table, which these functions must not write around the app. Each of them says so, before
-- anything else, rather than failing on whatever the app's table demands: 000011's caller check keeps its body under
-- the name `household_check_login`, and `household_check_caller`, which every household function calls first, is now
-- that check and this one.
ALTER FUNCTION caregiver_push.household_check_caller(text) RENAME TO household_check_login;

CREATE FUNCTION caregiver_push.household_check_caller(routine text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $check$
BEGIN
    PERFORM caregiver_push.household_check_login(routine);
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_class c
               WHERE c.relnamespace = 'caregiver_push'::regnamespace AND c.relname = 'patients' AND c.relkind = 'v')
    THEN
        RAISE EXCEPTION USING ERRCODE = 'feature_not_supported',
            MESSAGE = routine || ': the households are the app''s (an app mapping is applied): manage them in the app';
    END IF;
END
$check$;

REVOKE ALL ON FUNCTION caregiver_push.household_check_caller(text) FROM PUBLIC;

-- Deletes a patient and everything of theirs: caregiver links, patient sessions, medications and schedule times,
-- dose and PRN records, and the push events of their doses with those events' deliveries (the foreign keys cascade
-- from `patients`). Returns whether there was such a patient. For the role caregiver_push_households: a household
-- that leaves, and the throwaway household `runner check-deployment` makes and removes
-- (docs/deploy.md#prove-a-deployment).
-- Caregivers' devices are theirs, not the patient's, and stay.
CREATE FUNCTION caregiver_push.household_delete_patient(patient uuid) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $delete$
BEGIN
    PERFORM caregiver_push.household_check_caller('household_delete_patient');
    IF patient IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = 'patient',
            MESSAGE = 'patient is required';
    END IF;
    DELETE FROM caregiver_push.patients p WHERE p.id = patient;
    RETURN FOUND;
END
$delete$;

REVOKE ALL ON FUNCTION caregiver_push.household_delete_patient(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION caregiver_push.household_delete_patient(uuid) TO caregiver_push_households;

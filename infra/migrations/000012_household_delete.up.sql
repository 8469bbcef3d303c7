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

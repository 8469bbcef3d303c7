-- The app's ids (docs/behaviour.md#data-contract). Patients, medications and recordings are the app's rows, and
-- their ids are what the app made them: a UUID, a Prisma cuid, `patient-123`. The outbox keeps them as the app
-- does: a slot recording's group id is written into the app's dose table, whose column may be text, so the event
-- keeps it as text too. (`push_events.patient_id` follows the type of `patients.id`: the migrator sets it when an
-- operator maps the household relations onto the app's tables, Migrator.applyAppMapping.)
ALTER TABLE push_events ALTER COLUMN recording_group_id TYPE text USING recording_group_id::text;

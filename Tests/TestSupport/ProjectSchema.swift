/// What the migrations make in the project's schema (docs/deploy.md#the-database), for the tests that check every
/// relation: the twelve tables and the migration history.
package enum ProjectSchema {
    package static let name = "caregiver_push"
    package static let relations = [
        "patients", "caregiver_patient_links", "patient_sessions", "medications", "medication_schedule_times",
        "dose_records", "prn_dose_records", "push_devices", "push_deliveries", "fcm_access_tokens", "push_events",
        "jwks_cache", "schema_migrations",
    ]
}

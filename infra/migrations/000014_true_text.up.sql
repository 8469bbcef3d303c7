-- What each phone is told (docs/behaviour.md#payload, docs/behaviour.md#on-time).
--
-- Who recorded the event's doses: the patient, a caregiver, or both (two single doses of one slot in one minute,
-- recorded by different people). The push says so (data.recordedBy, and the text when a caregiver recorded).
ALTER TABLE push_events
    ADD COLUMN recorded_by text NOT NULL DEFAULT 'PATIENT' CHECK (recorded_by IN ('PATIENT', 'CAREGIVER', 'BOTH')),
    -- Bumped whenever a later recording merged into the event changes what its message says; the deliveries
    -- already sent (or being sent) are then owed again, under the same collapse id, so every phone ends up showing
    -- the text that is true of every dose in the event.
    ADD COLUMN revision integer NOT NULL DEFAULT 1 CHECK (revision >= 1);

-- The reader's language: the primary language subtag the app registered the device with; the message is worded in
-- it when the catalogue has it, and in Japanese otherwise.
ALTER TABLE push_devices
    ADD COLUMN language text NOT NULL DEFAULT 'ja' CHECK (language ~ '^[a-z]{2,3}$');

-- The event revision the delivery's last lease worded its message from. A delivery sent with an older revision than
-- its event's is owed again (the outcome of that send, or the recording that revised the event, puts it back to
-- PENDING); null until first leased.
ALTER TABLE push_deliveries
    ADD COLUMN sent_revision integer;

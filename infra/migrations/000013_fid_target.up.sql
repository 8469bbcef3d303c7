-- What a device's identity is (docs/behaviour.md#devices): an FCM registration token, or the Firebase Installation ID
-- (FID) that firebase-ios-sdk 12.18 and the 2026 Admin SDKs address messages by instead. The text stays in `token`
-- (its hash in `token_sha256`, the identity's key); `target` says which HTTP v1 field a message names it by.
-- Existing rows are tokens.
ALTER TABLE push_devices
    ADD COLUMN target text NOT NULL DEFAULT 'token' CHECK (target IN ('token', 'fid'));

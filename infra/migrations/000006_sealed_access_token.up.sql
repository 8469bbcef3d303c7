-- The shared FCM access token is stored sealed (docs/behaviour.md#access-token): AES-256-GCM under a key derived from
-- the service account's private key, which the database never sees, so that whoever can read this table still cannot
-- send a push. The clear-text tokens of earlier versions are deleted: the next send mints a new one.
DELETE FROM fcm_access_tokens;
ALTER TABLE fcm_access_tokens
    DROP COLUMN access_token,
    -- nonce (12 bytes) ‖ ciphertext ‖ tag (16 bytes); the client email is the authenticated data.
    ADD COLUMN sealed_token bytea NOT NULL CHECK (octet_length(sealed_token) BETWEEN 29 AND 8192);

-- The caregiver-token signing keys of SUPABASE_JWKS_URL (docs/behaviour.md#auth-jwks-url), fetched over HTTPS and
-- shared by every invocation the way fcm_access_tokens shares the OAuth token: one row per URL, written under a
-- transaction-scoped advisory lock by whichever invocation refreshes it. A document is kept for 10 minutes, used for up
-- to an hour while the endpoint is down, and refetched for an unknown `kid` at most once per 30 seconds (counted from
-- `attempted_at`).
CREATE TABLE jwks_cache (
    url          text PRIMARY KEY CHECK (char_length(url) BETWEEN 1 AND 2048),
    -- The last JWKS document that was fetched and parsed as a key set; NULL until one was.
    document     text CHECK (octet_length(document) <= 65536),
    -- When `document` was fetched: it is fresh for 10 minutes and usable for an hour.
    fetched_at   timestamptz,
    -- When a fetch was last tried, whatever came of it.
    attempted_at timestamptz NOT NULL,
    CHECK ((document IS NULL) = (fetched_at IS NULL))
);

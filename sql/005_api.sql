-- jobdesk schema, part 5: the HTTP API's tokens and idempotency keys, and who acted in the audit log.

-- Bearer tokens of `jobdesk api`. Only the SHA-256 of a token is kept: the token itself is shown
-- once, when it is made. A token with a user sees that user's jobs only; without one it is an
-- operator's. A revoked token keeps its row (the audit log names it) and frees its name.
CREATE TABLE api_tokens (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text        NOT NULL,
    token_hash  text        NOT NULL UNIQUE,
    user_id     integer     REFERENCES users (id),
    scopes      text[]      NOT NULL DEFAULT '{read,submit,operate,approve}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
CREATE UNIQUE INDEX api_tokens_live_name_idx ON api_tokens (name) WHERE revoked_at IS NULL;

-- The first answer to a POST carrying an Idempotency-Key, per caller, for 24 hours. Stored here
-- rather than in an API process so that every process serving the database honours it.
CREATE TABLE api_idempotency_keys (
    owner        text        NOT NULL,          -- the token's name ('' without auth)
    key          text        NOT NULL,
    fingerprint  text        NOT NULL,          -- SHA-256 of the route and the request body
    status_code  integer     NOT NULL DEFAULT 201,
    response     jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, key)
);
CREATE INDEX api_idempotency_keys_created_idx ON api_idempotency_keys (created_at);

-- The name of who acted beyond the OS user and source: an API token's name, say.
ALTER TABLE audit_log ADD COLUMN actor text;

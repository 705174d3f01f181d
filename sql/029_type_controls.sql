-- jobdesk schema, part 29: job types paused across the fleet, and limits and rates set at run time.
--
-- * `type_controls`: one row per type an operator paused or set limits on. A paused type's jobs
--   stay queued; workers keep the set of paused types (read on a notification and every poll
--   interval) and leave those types out of their claims, so the claim itself never reads this
--   table. The limit columns are the operator's values, each NULL where the operator set none:
--   the worker's setting (JOB_TYPE_LIMITS, JOB_RATE_LIMITS, JOB_USER_LIMITS, JOB_USER_RATE_LIMITS)
--   is then in force. `updated_at` changes with every change, so that a worker knows from one
--   value whether to read the limits again.
-- * The limits in force stay where the claims read them, `type_limits` and `flow_limits`; each
--   row keeps beside them what the settings declared (`env_*`), so that clearing the operator's
--   value puts the setting's back. A worker that starts declares its settings into `env_*`, and
--   into the limit in force only where the operator set none.
-- * A limit of 0 (of the type, or per user) lets no job of the type start, as a pause does.
-- * `audit_log.job_type`: the type an action on a type (pause, resume, limits) was about.

CREATE TABLE type_controls (
    type             varchar(255) PRIMARY KEY CHECK (type <> ''),
    paused           boolean      NOT NULL DEFAULT false,
    paused_by        text,                                     -- the actor: a token's name, or an OS user
    paused_at        timestamptz,
    reason           text,
    max_running      integer  CHECK (max_running >= 0),        -- jobs of the type in progress, fleet-wide
    rate_max         integer  CHECK (rate_max >= 1),           -- starts per rate_period, fleet-wide
    rate_period      interval CHECK (rate_period > '0'),
    user_max_running integer  CHECK (user_max_running >= 0),   -- jobs in progress per user
    user_rate_max    integer  CHECK (user_rate_max >= 1),      -- starts per user_rate_period, per user
    user_rate_period interval CHECK (user_rate_period > '0'),
    limits_set_by    text,
    limits_set_at    timestamptz,
    updated_at       timestamptz  NOT NULL DEFAULT now(),
    CHECK ((rate_max IS NULL) = (rate_period IS NULL)),
    CHECK ((user_rate_max IS NULL) = (user_rate_period IS NULL))
);

ALTER TABLE type_limits ADD COLUMN env_max_running integer;
UPDATE type_limits SET env_max_running = max_running;
ALTER TABLE type_limits DROP CONSTRAINT type_limits_max_running_check;
ALTER TABLE type_limits ADD CONSTRAINT type_limits_max_running_check CHECK (max_running >= 0);

ALTER TABLE flow_limits ADD COLUMN env_rate_max integer, ADD COLUMN env_rate_period interval,
    ADD COLUMN env_user_rate_max integer, ADD COLUMN env_user_rate_period interval,
    ADD COLUMN env_user_max_running integer;
UPDATE flow_limits SET env_rate_max = rate_max, env_rate_period = rate_period, env_user_rate_max = user_rate_max,
       env_user_rate_period = user_rate_period, env_user_max_running = user_max_running;
ALTER TABLE flow_limits DROP CONSTRAINT flow_limits_user_max_running_check;
ALTER TABLE flow_limits ADD CONSTRAINT flow_limits_user_max_running_check CHECK (user_max_running >= 0);

ALTER TABLE audit_log ADD COLUMN job_type text;

-- Puts a type's limits in force: the operator's (type_controls) where set, else the settings'
-- (env_*). A row left without any limit is removed, so that the type's claims are plain again.
CREATE FUNCTION jobdesk_apply_type_controls(job_type text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    c     type_controls%ROWTYPE;
    f     flow_limits%ROWTYPE;
    fleet integer;
BEGIN
    SELECT * INTO c FROM type_controls WHERE type = job_type;
    SELECT COALESCE(c.max_running, l.env_max_running) INTO fleet FROM type_limits l WHERE l.type = job_type;
    IF NOT FOUND THEN
        fleet := c.max_running;
    END IF;
    IF fleet IS NULL THEN
        DELETE FROM type_limits WHERE type = job_type;
    ELSE
        INSERT INTO type_limits AS l (type, max_running) VALUES (job_type, fleet)
        ON CONFLICT (type) DO UPDATE SET max_running = EXCLUDED.max_running, updated_at = now()
         WHERE l.max_running <> EXCLUDED.max_running;
    END IF;
    SELECT * INTO f FROM flow_limits WHERE type = job_type FOR UPDATE;
    IF NOT FOUND THEN
        f.type := job_type;
        f.fair_share := false;
    END IF;
    IF c.rate_max IS NOT NULL THEN
        f.rate_max := c.rate_max; f.rate_period := c.rate_period;
    ELSE
        f.rate_max := f.env_rate_max; f.rate_period := f.env_rate_period;
    END IF;
    IF c.user_rate_max IS NOT NULL THEN
        f.user_rate_max := c.user_rate_max; f.user_rate_period := c.user_rate_period;
    ELSE
        f.user_rate_max := f.env_user_rate_max; f.user_rate_period := f.env_user_rate_period;
    END IF;
    f.user_max_running := COALESCE(c.user_max_running, f.env_user_max_running);
    IF f.rate_max IS NULL AND f.user_rate_max IS NULL AND f.user_max_running IS NULL AND NOT f.fair_share THEN
        DELETE FROM flow_limits WHERE type = job_type;
        RETURN;
    END IF;
    INSERT INTO flow_limits AS x (type, rate_max, rate_period, user_rate_max, user_rate_period, user_max_running)
    VALUES (job_type, f.rate_max, f.rate_period, f.user_rate_max, f.user_rate_period, f.user_max_running)
    ON CONFLICT (type) DO UPDATE
       SET rate_max = EXCLUDED.rate_max, rate_period = EXCLUDED.rate_period, user_rate_max = EXCLUDED.user_rate_max,
           user_rate_period = EXCLUDED.user_rate_period, user_max_running = EXCLUDED.user_max_running,
           updated_at = now()
     WHERE (x.rate_max, x.rate_period, x.user_rate_max, x.user_rate_period, x.user_max_running)
           IS DISTINCT FROM (EXCLUDED.rate_max, EXCLUDED.rate_period, EXCLUDED.user_rate_max,
                             EXCLUDED.user_rate_period, EXCLUDED.user_max_running);
END $$;

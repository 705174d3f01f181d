-- jobdesk schema, part 21: durable processors. A processor's steps are stored so that a job
-- that runs again (after a failure, a crash or a suspension) does not redo them; a job can be
-- suspended while it sleeps or waits for an event or for its child jobs, holding no slot.
--
-- A suspended job is `queued`, with its wake time in `run_at` ('infinity' when it waits with no
-- timeout): the claim's walk of due jobs takes it when that time comes, as it takes a delayed
-- job. What it waits for is its row in `job_waits`, for as long as that attempt stays
-- suspended. Its wakers (an event, the end of its last child) clear `run_at`, so that the next
-- claim takes it at once.

-- The results of a job's steps, by name. Kept with the job and pruned with it.
CREATE TABLE job_steps (
    job_id      varchar(36) NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    name        text NOT NULL,
    result      jsonb,
    attempt     integer NOT NULL,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, name)
);

-- Events: the first emit of a key is the one every wait on it sees; later emits change nothing.
-- Plain SQL may emit too: INSERT INTO job_events (key, payload) VALUES ('upload-done:42', '{}').
CREATE TABLE job_events (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key        text NOT NULL CHECK (key <> ''),
    payload    jsonb,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX job_events_key_idx ON job_events (key, id);

-- What a suspended job waits for: one row per job, that of its latest suspension (`attempt`).
CREATE TABLE job_waits (
    job_id     varchar(36) PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    attempt    integer NOT NULL,
    kind       text NOT NULL CHECK (kind IN ('sleep', 'event', 'jobs')),
    event_key  text,
    child_ids  text[],
    until      timestamptz NOT NULL,
    step_name  text NOT NULL,  -- the checkpoint step of the wait, which a wake may complete
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX job_waits_event_idx ON job_waits (event_key) WHERE event_key IS NOT NULL;

-- The job whose `job.spawn` created this one. A spawned job's end may wake its parent.
ALTER TABLE jobs ADD COLUMN spawned_by varchar(36);

-- Waits and emits of one key meet under one of 256 advisory locks (by the key's hash): an
-- emit takes the locks of its keys, in order, before it looks for waiting jobs, and a
-- suspension takes its key's lock before it looks for the event. Whichever comes second sees
-- the other, so a wait never misses an event emitted at the same moment.
CREATE FUNCTION jobdesk_event_lock(key text) RETURNS void
LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(1785688677, abs(hashtext(key)) % 256)
$$;

-- A wake also writes the event's payload (that of the key's first emit) into the wait's
-- checkpoint step, so the job that runs again finds it with its other steps, in one read. The
-- keys are looked up as an array, in the waits' index by key, whatever the statistics say: a
-- join to the transition table was planned as a rescan of every key per wait while `job_waits`
-- was not yet analyzed (13 s for 10,000 keys instead of 0.1 s).
CREATE FUNCTION jobdesk_events_wake() RETURNS trigger
LANGUAGE plpgsql
SET enable_seqscan = off
AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(1785688677, b)
       FROM (SELECT DISTINCT abs(hashtext(key)) % 256 AS b FROM new_events ORDER BY 1) locks;
    WITH woken AS (
        UPDATE jobs j SET run_at = NULL, updated_at = now()
          FROM job_waits w
         WHERE w.event_key = ANY (ARRAY(SELECT DISTINCT key FROM new_events))
           AND j.id = w.job_id AND j.attempts = w.attempt
           AND j.status = 'queued' AND j.run_at IS NOT NULL
        RETURNING w.job_id, w.step_name, w.event_key
    ), first AS (
        SELECT DISTINCT ON (e.key) e.key, e.payload FROM job_events e
         WHERE e.key = ANY (ARRAY(SELECT DISTINCT event_key FROM woken)) ORDER BY e.key, e.id
    )
    UPDATE job_steps s SET result = jsonb_build_object('key', w.event_key, 'payload', f.payload),
                           finished_at = now()
      FROM woken w JOIN first f ON f.key = w.event_key
     WHERE s.job_id = w.job_id AND s.name = w.step_name;
    IF FOUND THEN
        PERFORM pg_notify('jobdesk_new_jobs', '');
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER job_events_wake AFTER INSERT ON job_events
    REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT EXECUTE FUNCTION jobdesk_events_wake();

-- A spawned job that ends wakes its parent once all the children it waits for have ended. The
-- parent's row is locked first: that orders this with the parent's suspension and with its
-- other children's ends, so the last child to end always sees the others ended.
CREATE FUNCTION jobdesk_jobs_wake_parent() RETURNS trigger
LANGUAGE plpgsql
SET enable_seqscan = off
SET plan_cache_mode = 'auto'
AS $$
BEGIN
    PERFORM 1 FROM jobs WHERE id = NEW.spawned_by FOR UPDATE;
    UPDATE jobs p SET run_at = NULL, updated_at = now()
     WHERE p.id = NEW.spawned_by AND p.status = 'queued' AND p.run_at IS NOT NULL
       AND EXISTS (SELECT 1 FROM job_waits w
                    WHERE w.job_id = p.id AND w.attempt = p.attempts AND w.kind = 'jobs'
                      AND NOT EXISTS (SELECT 1 FROM jobs c WHERE c.id = ANY (w.child_ids)
                                         AND c.status NOT IN ('completed', 'failed', 'cancelled')));
    IF FOUND THEN
        PERFORM pg_notify('jobdesk_new_jobs', '');
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_wake_parent AFTER UPDATE OF status ON jobs FOR EACH ROW
    WHEN (NEW.spawned_by IS NOT NULL AND NEW.status IN ('completed', 'failed', 'cancelled')
          AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION jobdesk_jobs_wake_parent();

-- Suspends a running job (fenced by worker and attempt, as every worker write is): it goes back
-- to `queued` until `until`, or at once when what it waits for is there already (the event was
-- emitted, the children have ended). The checkpoint step `step_name` is stored with it, and the
-- suspension is recorded in the job's attempt history. Returns 'suspended', 'ready' (queued to
-- run again at once), or NULL when the worker no longer owns the job (or it was cancelled).
CREATE FUNCTION jobdesk_suspend(p_job varchar, p_worker varchar, p_attempt integer, p_kind text,
                                p_until timestamptz, p_event_key text, p_child_ids text[],
                                p_step_name text, p_step_result jsonb, p_step_started timestamptz)
RETURNS text
LANGUAGE plpgsql
SET enable_seqscan = off
SET plan_cache_mode = 'auto'
AS $$
DECLARE
    ready   boolean := false;
    started timestamptz;
    jtype   varchar;
BEGIN
    IF p_event_key IS NOT NULL THEN
        PERFORM jobdesk_event_lock(p_event_key);
    END IF;
    SELECT j.started_at, j.type INTO started, jtype FROM jobs j
     WHERE j.id = p_job AND j.worker_id = p_worker AND j.attempts = p_attempt
       AND j.status = 'in_progress' AND j.is_active
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF p_step_name IS NOT NULL THEN
        INSERT INTO job_steps (job_id, name, result, attempt, started_at)
        VALUES (p_job, p_step_name, p_step_result, p_attempt, p_step_started)
        ON CONFLICT (job_id, name) DO NOTHING;
    END IF;
    IF p_kind = 'event' THEN
        -- Emitted meanwhile: its payload completes the checkpoint, as a wake does.
        UPDATE job_steps s SET result = jsonb_build_object('key', p_event_key, 'payload', e.payload),
                               finished_at = now()
          FROM (SELECT payload FROM job_events WHERE key = p_event_key ORDER BY id LIMIT 1) e
         WHERE s.job_id = p_job AND s.name = p_step_name;
        ready := FOUND;
    ELSIF p_kind = 'jobs' THEN
        ready := NOT EXISTS (SELECT 1 FROM jobs c WHERE c.id = ANY (p_child_ids)
                               AND c.status NOT IN ('completed', 'failed', 'cancelled'));
    END IF;
    ready := ready OR p_until <= now();
    INSERT INTO job_waits (job_id, attempt, kind, event_key, child_ids, until, step_name)
    VALUES (p_job, p_attempt, p_kind, p_event_key, p_child_ids, p_until, p_step_name)
    ON CONFLICT (job_id) DO UPDATE
       SET attempt = EXCLUDED.attempt, kind = EXCLUDED.kind, event_key = EXCLUDED.event_key,
           child_ids = EXCLUDED.child_ids, until = EXCLUDED.until, step_name = EXCLUDED.step_name,
           created_at = now();
    UPDATE jobs SET status = 'queued', worker_id = NULL, updated_at = now(),
                    run_at = CASE WHEN ready THEN NULL ELSE p_until END
     WHERE id = p_job;
    INSERT INTO job_attempts (job_id, attempt, worker_id, started_at, outcome, error_message, job_type)
    VALUES (p_job, p_attempt, p_worker, started, 'suspended',
            CASE p_kind WHEN 'sleep' THEN 'sleeping' WHEN 'event' THEN 'waiting for event ' || p_event_key
                        ELSE 'waiting for child jobs' END, jtype);
    RETURN CASE WHEN ready THEN 'ready' ELSE 'suspended' END;
END $$;

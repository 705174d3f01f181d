-- jobdesk schema, part 6: backlogs that cost the claim nothing, and a cheap enqueue.
--
-- The claim used to walk one index in (priority, seq) order and filter by type and retry time,
-- so queued jobs that no live worker serves, or whose retry is an hour away, were walked over
-- by every claim. Now:
--
-- * `run_at` is when a queued job becomes runnable; NULL means now. The engine sets it when a
--   failed job waits for its retry (and a plain INSERT with a future `next_retry_at` gets it
--   from the insert trigger); the claim clears it once the time has come. Jobs that wait are
--   only in `jobs_waiting_idx`, ordered by that time, so a claim reads one entry of it when
--   nothing is due, however many wait.
-- * `jobs_ready_idx` holds the runnable jobs per type, in claim order, so a worker reads only
--   the types it serves: one plain index walk per type, merged.
--
-- `next_retry_at` keeps its meaning (when the retry was scheduled) and is left as it was.

ALTER TABLE jobs ADD COLUMN run_at timestamptz DEFAULT NULL;   -- NULL: runnable now

UPDATE jobs SET run_at = next_retry_at
 WHERE status = 'queued' AND next_retry_at > now();

CREATE INDEX jobs_ready_idx ON jobs (type, priority DESC, seq)
    WHERE status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL;
CREATE INDEX jobs_waiting_idx ON jobs (run_at)
    WHERE status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NOT NULL;
DROP INDEX jobs_claimable_idx;

-- The insert trigger now runs only for rows that need it: with dependencies, a pending_deps
-- to correct, or a retry time. Independent jobs, nearly every row of a bulk enqueue, skip the
-- function call. What it checks and refuses is unchanged.
CREATE OR REPLACE FUNCTION jobdesk_jobs_before_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    dep_ids   text[];
    found     integer;
    pending   integer;
    cancelled text;
BEGIN
    IF NEW.run_at IS NULL AND NEW.next_retry_at > now() THEN
        NEW.run_at := NEW.next_retry_at;
    END IF;
    IF NEW.dependent_on_jobs IS NULL OR jsonb_typeof(NEW.dependent_on_jobs) <> 'array'
       OR jsonb_array_length(NEW.dependent_on_jobs) = 0 THEN
        NEW.pending_deps := 0;
        RETURN NEW;
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(NEW.dependent_on_jobs) e
                WHERE jsonb_typeof(e) <> 'string') THEN
        RAISE EXCEPTION 'dependent_on_jobs of job % must be an array of job ids', NEW.id
            USING ERRCODE = 'JD001';
    END IF;
    SELECT array_agg(DISTINCT e) INTO dep_ids FROM jsonb_array_elements_text(NEW.dependent_on_jobs) e;
    IF NEW.id = ANY (dep_ids) THEN
        RAISE EXCEPTION 'job % depends on itself', NEW.id USING ERRCODE = 'JD002';
    END IF;
    SELECT count(*), count(*) FILTER (WHERE j.status <> 'completed'),
           min(j.id) FILTER (WHERE j.status = 'cancelled')
      INTO found, pending, cancelled
      FROM (SELECT id, status FROM jobs WHERE id = ANY (dep_ids) FOR NO KEY UPDATE) j;
    IF found < cardinality(dep_ids) THEN
        RAISE EXCEPTION 'job % depends on unknown job %', NEW.id,
            (SELECT min(d) FROM unnest(dep_ids) d WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE id = d))
            USING ERRCODE = 'JD003';
    END IF;
    NEW.pending_deps := pending;
    IF cancelled IS NOT NULL AND NEW.status = 'queued' THEN
        NEW.status := 'cancelled';
        NEW.is_active := false;
        NEW.error_message := 'cancelled: dependency ' || cancelled || ' was cancelled';
    END IF;
    RETURN NEW;
END $$;

-- Not CREATE OR REPLACE TRIGGER: that needs PostgreSQL 14, and 13 is supported.
-- `dependent_on_jobs <> '[]'` is NULL for NULL (no dependencies): the trigger is skipped, as
-- the function would have changed nothing. Any other value, well-formed or not, runs it.
DROP TRIGGER jobs_before_insert ON jobs;
CREATE TRIGGER jobs_before_insert BEFORE INSERT ON jobs
    FOR EACH ROW
    WHEN (NEW.dependent_on_jobs <> '[]'::jsonb OR NEW.pending_deps <> 0 OR NEW.next_retry_at IS NOT NULL)
    EXECUTE FUNCTION jobdesk_jobs_before_insert();

-- One statement-level trigger for inserts instead of two: the same notifications, on the same
-- channels, once per statement (`jobdesk_job_changes` with the ids, then `jobdesk_new_jobs`),
-- at half the trigger calls. A backend that enqueues with one INSERT per row pays this per row.
CREATE FUNCTION jobdesk_notify_inserted_jobs() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    changed integer;
    ids     text;
BEGIN
    SELECT count(*), string_agg(id, ',') INTO changed, ids
      FROM (SELECT id FROM changed_rows LIMIT 151) c;
    IF changed = 0 THEN
        PERFORM pg_notify('jobdesk_new_jobs', '');
    ELSE
        -- NOTIFY payloads are limited to 8000 bytes: 150 ids of 36 characters fit comfortably.
        PERFORM pg_notify('jobdesk_job_changes', CASE WHEN changed > 150 THEN '*' ELSE ids END),
                pg_notify('jobdesk_new_jobs', '');
    END IF;
    RETURN NULL;
END $$;

DROP TRIGGER jobs_notify_insert ON jobs;
DROP TRIGGER jobs_notify_changes_insert ON jobs;
CREATE TRIGGER jobs_notify_changes_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobdesk_notify_inserted_jobs();

-- jobdesk schema, part 13: delayed jobs, unique jobs and concurrency limits per type.
--
-- * `scheduled_at`: a job runs no earlier than this. The insert trigger turns a future value
--   into `run_at`, so a delayed job waits in jobs_waiting_idx exactly like a retry and costs
--   the claim one index entry however many wait. It stays as given (the console shows it).
-- * `unique_key`: at most one unfinished (queued, in progress or waiting for approval) job per
--   key. The partial unique index is the guarantee, so concurrent enqueuers cannot race; plain
--   SQL gets "insert unless one exists" with
--   INSERT ... ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL
--       AND status IN ('queued', 'in_progress', 'waiting_approval') DO NOTHING.
-- * `type_limits`: at most `max_running` jobs of a type in progress across every worker.
--   Workers upsert it from JOB_TYPE_LIMITS at start; a claim of a limited type locks its row,
--   so two claims never both see a free slot.

ALTER TABLE jobs ADD COLUMN scheduled_at timestamptz DEFAULT NULL;  -- NULL: as soon as possible
ALTER TABLE jobs ADD COLUMN unique_key varchar(255) DEFAULT NULL;   -- NULL: no uniqueness

CREATE UNIQUE INDEX jobs_unique_key_idx ON jobs (unique_key)
    WHERE unique_key IS NOT NULL AND status IN ('queued', 'in_progress', 'waiting_approval');

CREATE TABLE type_limits (
    type        varchar(255) PRIMARY KEY,
    max_running integer      NOT NULL CHECK (max_running >= 1),
    updated_at  timestamptz  NOT NULL DEFAULT now()
);

-- How many jobs of a type a claim may take: at most `want`, and no more than leave `fleet_max`
-- (the type's max_running, which the calling statement has locked; NULL: no global limit) and
-- `own_cap` (the claiming worker's own cap; NULL: none) in progress. VOLATILE, so the count is
-- read with a snapshot taken now, after the locks are held, and sees every claim committed
-- before; the calling statement's own snapshot may be older. `done_ids`/`done_attempts` are jobs
-- of the worker that the calling statement completes: not counted, as they are finishing.
CREATE FUNCTION jobdesk_type_room(worker varchar, job_type text, fleet_max integer, own_cap integer,
                                  want integer, done_ids text[] DEFAULT '{}',
                                  done_attempts integer[] DEFAULT '{}') RETURNS integer
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    total integer;
    mine  integer;
BEGIN
    IF own_cap IS NOT NULL THEN  -- the worker's own claims of the type, one at a time
        PERFORM pg_advisory_xact_lock(hashtext('jobdesk.type_cap.' || worker || '.' || job_type));
    END IF;
    SELECT count(*), count(*) FILTER (WHERE worker_id = worker) INTO total, mine
      FROM jobs j WHERE status = 'in_progress' AND type = job_type
       AND NOT (j.worker_id = worker AND j.is_active
                AND (j.id, j.attempts) IN (SELECT * FROM unnest(done_ids, done_attempts)));
    RETURN GREATEST(0, LEAST(want, fleet_max - total, own_cap - mine));
END $$;

CREATE OR REPLACE FUNCTION jobdesk_jobs_before_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    dep_ids   text[];
    found     integer;
    pending   integer;
    cancelled text;
BEGIN
    IF NEW.run_at IS NULL AND (NEW.next_retry_at > now() OR NEW.scheduled_at > now()) THEN
        NEW.run_at := GREATEST(NEW.next_retry_at, NEW.scheduled_at);
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

DROP TRIGGER jobs_before_insert ON jobs;
CREATE TRIGGER jobs_before_insert BEFORE INSERT ON jobs
    FOR EACH ROW
    WHEN (NEW.dependent_on_jobs <> '[]'::jsonb OR NEW.pending_deps <> 0 OR NEW.next_retry_at IS NOT NULL
          OR NEW.scheduled_at IS NOT NULL)
    EXECUTE FUNCTION jobdesk_jobs_before_insert();

-- jobdesk schema, part 20: the triggers that look jobs up by id walk the primary key whatever
-- the size of `jobs` and whatever plan their session keeps.
--
-- Flagging a job's parents (has_dependants) and releasing a completed job's dependants joined
-- `jobs` to a list of ids, a join the planner read the whole table for while it thought the
-- table small: each job inserted with a dependency then read every row, so a pipeline cost
-- more with each job (0.85 ms each at 2,000 jobs, 3 ms at 8,000). They now look the ids up,
-- and the parents are flagged by the insert check that locks them, only when one is not yet
-- (a parent's first dependant), instead of by one more statement for every dependant.
--
-- PL/pgSQL prepares a function's statements once per session and, after a few calls, keeps
-- one generic plan for them. A session that inserted jobs with dependencies while `jobs` was
-- small (a web backend's long-lived connection, the console, the HTTP API) kept the plan made
-- then, a read of the whole table, until an ANALYZE: at 300,000 rows, enqueueing a parent and
-- its child took 150 ms instead of 2.5. These functions only ever look rows up by key, so they
-- plan without sequential scans wherever an index serves, and keep those plans, even in the
-- sessions that plan each call of their own statements (jobdesk's service: CLI, console, HTTP
-- API): planning each call would cost a third of the insert (1,400 jobs with a dependency a
-- second, one INSERT each, against 4,000).

CREATE OR REPLACE FUNCTION jobdesk_jobs_before_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    dep_ids    text[];
    found      integer;
    pending    integer;
    cancelled  text;
    unflagged  boolean;
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
           min(j.id) FILTER (WHERE j.status = 'cancelled'), bool_or(NOT j.has_dependants)
      INTO found, pending, cancelled, unflagged
      FROM (SELECT id, status, has_dependants FROM jobs WHERE id = ANY (dep_ids) FOR NO KEY UPDATE) j;
    IF found < cardinality(dep_ids) THEN
        RAISE EXCEPTION 'job % depends on unknown job %', NEW.id,
            (SELECT min(d) FROM unnest(dep_ids) d WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE id = d))
            USING ERRCODE = 'JD003';
    END IF;
    IF unflagged THEN  -- the parents' first dependant: they are locked, so this is the only one
        UPDATE jobs SET has_dependants = true WHERE id = ANY (dep_ids) AND NOT has_dependants;
    END IF;
    NEW.pending_deps := pending;
    IF cancelled IS NOT NULL AND NEW.status = 'queued' THEN
        NEW.status := 'cancelled';
        NEW.is_active := false;
        NEW.error_message := 'cancelled: dependency ' || cancelled || ' was cancelled';
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION jobdesk_jobs_after_insert_edges() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_dependencies (job_id, depends_on_id)
    SELECT DISTINCT NEW.id, e FROM jsonb_array_elements_text(NEW.dependent_on_jobs) e;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION jobdesk_jobs_release_dependants() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE jobs SET pending_deps = pending_deps - 1
     WHERE id = ANY (ARRAY(SELECT job_id FROM job_dependencies WHERE depends_on_id = NEW.id));
    RETURN NULL;
END $$;

ALTER FUNCTION jobdesk_jobs_before_insert() SET enable_seqscan = off SET plan_cache_mode = auto;
ALTER FUNCTION jobdesk_jobs_after_insert_edges() SET enable_seqscan = off SET plan_cache_mode = auto;
ALTER FUNCTION jobdesk_jobs_release_dependants() SET enable_seqscan = off SET plan_cache_mode = auto;
ALTER FUNCTION jobdesk_jobs_rescheduled() SET enable_seqscan = off SET plan_cache_mode = auto;

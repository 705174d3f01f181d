-- jobdesk schema, part 34: a running job's stack, asked for by an operator and kept.
--
-- * `job_stack_requests`: an operator's question to the worker that runs a job, "what is it
--   doing now?". The asker inserts a row and sends a NOTIFY on `jobdesk_control`; the worker
--   hears it, or, behind a transaction pooler where it cannot LISTEN, finds it with the query it
--   already makes every poll interval for its running jobs' cancellations. The worker deletes
--   the rows it answers; an asker that gives up deletes its own. Empty while no one asks.
-- * `job_stacks`: the last stack taken of each job, one row per job: the attempt it belongs to,
--   the worker that took it, when, and its frames (outermost first), each
--   `{"file", "line", "function", "source"}`. Kept after the job ends, and shown then as the
--   stack it was last seen in.
--
-- Both go with their job, through the shared statement triggers of migrations 024 and 027
-- (jobs_forget_children, jobs_truncate_children), whose functions are extended here as 027
-- extended them: one scan of the deleted rows for every table that belongs to a job.

CREATE TABLE job_stack_requests (
    id        bigserial   PRIMARY KEY,
    job_id    varchar(36) NOT NULL,
    worker_id varchar(64) NOT NULL,
    asked_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX job_stack_requests_worker ON job_stack_requests (worker_id);

CREATE TABLE job_stacks (
    job_id    varchar(36) NOT NULL PRIMARY KEY,
    attempt   integer     NOT NULL,
    worker_id varchar(64) NOT NULL,
    taken_at  timestamptz NOT NULL,
    frames    jsonb       NOT NULL
);

CREATE OR REPLACE FUNCTION jobdesk_jobs_forget_children() RETURNS trigger
LANGUAGE plpgsql
SET enable_seqscan TO 'off'
AS $$
DECLARE
    ids varchar[];
BEGIN
    SELECT array_agg(id) INTO ids FROM gone_rows;
    IF ids IS NULL THEN
        RETURN NULL;
    END IF;
    DELETE FROM job_attempts       WHERE job_id = ANY (ids);
    DELETE FROM job_steps          WHERE job_id = ANY (ids);
    DELETE FROM job_waits          WHERE job_id = ANY (ids);
    DELETE FROM job_dependencies   WHERE job_id = ANY (ids);
    DELETE FROM job_dependencies   WHERE depends_on_id = ANY (ids);
    DELETE FROM job_progress       WHERE job_id = ANY (ids);
    DELETE FROM job_logs           WHERE job_id = ANY (ids);
    DELETE FROM job_stacks         WHERE job_id = ANY (ids);
    DELETE FROM job_stack_requests WHERE job_id = ANY (ids);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION jobdesk_jobs_truncate_children() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE job_attempts, job_dependencies, job_steps, job_waits, job_progress, job_logs,
             job_stacks, job_stack_requests;
    RETURN NULL;
END $$;

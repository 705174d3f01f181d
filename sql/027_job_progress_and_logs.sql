-- jobdesk schema, part 27: what a job says while it runs, its progress and its own log lines.
--
-- * `job_progress`: the last fraction (0 to 1) and message a running processor reported, one
--   row per job. A side table, not columns on `jobs`: a processor that reports twice a second
--   would otherwise write a new version of its job row each time, and the claim's table and
--   indexes would carry those dead rows. Kept after the job ends; the retry transitions delete it.
-- * `job_logs`: the log records a processor emitted, by job, attempt and order within the
--   attempt. A worker writes them in batches and keeps each attempt within JOB_LOG_MAX_LINES and
--   JOB_LOG_MAX_BYTES, then writes one line saying how many it dropped. `trace_id` and `span_id`
--   are the OpenTelemetry ids of the run, when a tracer is set up (NULL otherwise).
--
-- Both go with their job as its other rows do (migration 024): the statement-level triggers that
-- delete a deleted job's attempts, steps, waits and edges delete these too, and TRUNCATE jobs
-- empties them. No foreign key: a cascading key would run a lookup and a delete per pruned job.
-- A worker writes a job's rows only while the job exists, locking its key (FOR KEY SHARE) as a
-- key's check would. Neither table adds an index or a trigger to `jobs`.

CREATE TABLE job_progress (
    job_id   varchar(36)      NOT NULL PRIMARY KEY,
    fraction double precision NOT NULL CHECK (fraction >= 0 AND fraction <= 1),
    message  text,
    at       timestamptz      NOT NULL DEFAULT now()
);

CREATE TABLE job_logs (
    job_id   varchar(36) NOT NULL,
    attempt  integer     NOT NULL,
    seq      integer     NOT NULL,
    at       timestamptz NOT NULL,
    level    varchar(16) NOT NULL,
    logger   text        NOT NULL,
    message  text        NOT NULL,
    trace_id text,
    span_id  text,
    PRIMARY KEY (job_id, attempt, seq)
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
    DELETE FROM job_attempts     WHERE job_id = ANY (ids);
    DELETE FROM job_steps        WHERE job_id = ANY (ids);
    DELETE FROM job_waits        WHERE job_id = ANY (ids);
    DELETE FROM job_dependencies WHERE job_id = ANY (ids);
    DELETE FROM job_dependencies WHERE depends_on_id = ANY (ids);
    DELETE FROM job_progress     WHERE job_id = ANY (ids);
    DELETE FROM job_logs         WHERE job_id = ANY (ids);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION jobdesk_jobs_truncate_children() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE job_attempts, job_dependencies, job_steps, job_waits, job_progress, job_logs;
    RETURN NULL;
END $$;

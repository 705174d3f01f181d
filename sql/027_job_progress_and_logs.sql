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
-- Both are pruned with their job (ON DELETE CASCADE); neither adds an index or a trigger to `jobs`.

CREATE TABLE job_progress (
    job_id   varchar(36)      NOT NULL PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    fraction double precision NOT NULL CHECK (fraction >= 0 AND fraction <= 1),
    message  text,
    at       timestamptz      NOT NULL DEFAULT now()
);

CREATE TABLE job_logs (
    job_id   varchar(36) NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
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

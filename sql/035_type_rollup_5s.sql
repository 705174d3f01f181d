-- jobdesk schema, part 35: the last minutes of each job type, in 5-second buckets.
--
-- `jobdesk types`, GET /api/types and the console's types view show, per type, the jobs finished
-- and the attempts failed in each 5 s of the last 5 minutes. The minute rows of job_stats are too
-- coarse for that, and counting finished jobs in `jobs` is what no screen may do. The workers
-- write this table in the same statement, and from the same fold, as job_stats (part 14), about
-- once a second; the worker that counts the queue depth each minute drops the rows older than
-- 10 minutes, so the table holds at most about 120 rows per type.

CREATE TABLE job_stats_5s (
    bucket    timestamptz  NOT NULL,            -- start of the 5-second bucket (UTC, whole multiples of 5 s)
    type      varchar(255) NOT NULL,
    finished  integer      NOT NULL DEFAULT 0,  -- jobs that completed or failed for good
    failed    integer      NOT NULL DEFAULT 0,  -- attempts that failed (retried or not)
    PRIMARY KEY (bucket, type)
);

-- jobdesk schema, part 11: a small rollup of the queue for the Metrics tab and `jobdesk stats`.
--
-- Statement-level triggers on `jobs` keep three small tables up to date, whichever path changes
-- a job (a worker, an operator, a plain SQL INSERT), so no chart ever scans `jobs`:
--   job_status_counts  jobs per status now, spread over 16 shards so that concurrent writers
--                      rarely wait for each other's row (a reader sums the shards);
--   job_stats          per minute ('m') and per hour ('h') and job type: jobs completed and
--                      failed, and the net change of the queued, in_progress and
--                      waiting_approval counts (the queue depth of any past bucket is the
--                      count now minus the changes since);
--   job_stats_hist     per minute, hour and day ('d') and type: how many attempts waited and ran how long,
--                      in logarithmic bins (bin 0: under 1 ms; bin k: 2^((k-1)/2) to 2^(k/2) ms;
--                      bin 55 holds everything from 2^27 ms, about 37 hours, up), from which
--                      p50 and p95 are read to within the width of a bin.
-- Buckets are UTC minutes and hours. One upsert per statement and bucket, so a batch of 100
-- completions costs a handful of row writes.

CREATE TABLE job_status_counts (
    status  varchar(32) NOT NULL,
    shard   smallint    NOT NULL,
    n       bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (status, shard)
);

CREATE TABLE job_stats (
    grain          char(1)      NOT NULL,          -- 'm': minute, 'h': hour
    bucket         timestamptz  NOT NULL,          -- start of the UTC minute or hour
    type           varchar(255) NOT NULL,
    completed      integer      NOT NULL DEFAULT 0,
    failed         integer      NOT NULL DEFAULT 0,  -- jobs that failed for good
    d_queued       integer      NOT NULL DEFAULT 0,
    d_in_progress  integer      NOT NULL DEFAULT 0,
    d_waiting      integer      NOT NULL DEFAULT 0,  -- waiting_approval
    PRIMARY KEY (grain, bucket, type)
);

CREATE TABLE job_stats_hist (
    grain   char(1)      NOT NULL,
    bucket  timestamptz  NOT NULL,
    type    varchar(255) NOT NULL,
    metric  varchar(8)   NOT NULL,   -- 'wait': enqueue (or retry due) to start; 'run': start to end
    bin     smallint     NOT NULL,
    n       integer      NOT NULL DEFAULT 0,
    PRIMARY KEY (grain, bucket, metric, type, bin)
);

-- One job's change, as the triggers see it. An attempt that ended carries its wait and run.
CREATE TYPE jobdesk_job_change AS (
    type         text,
    old_status   text,          -- NULL: the job was inserted
    new_status   text,          -- NULL: the job was deleted
    finished_at  timestamptz,   -- when it completed, failed or its attempt ended
    wait_s       float8,
    run_s        float8
);

CREATE FUNCTION jobdesk_stats_bin(secs float8) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN secs IS NULL OR secs < 0.001 THEN 0
                ELSE least(55, 1 + floor(2 * ln(secs * 1000) / ln(2)))::smallint END
$$;

-- Rows are upserted in key order, so that two statements never take the same rollup rows in
-- opposite orders (which would deadlock).
CREATE FUNCTION jobdesk_stats_record(changes jobdesk_job_change[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_status_counts AS t (status, shard, n)
    SELECT s, pg_backend_pid() % 16, sum(d)
      FROM (SELECT c.new_status AS s, 1 AS d FROM unnest(changes) c WHERE c.new_status IS NOT NULL
            UNION ALL
            SELECT c.old_status, -1 FROM unnest(changes) c WHERE c.old_status IS NOT NULL) x
     GROUP BY s
    HAVING sum(d) <> 0
     ORDER BY s
    ON CONFLICT (status, shard) DO UPDATE SET n = t.n + EXCLUDED.n;

    INSERT INTO job_stats AS t (grain, bucket, type, completed, failed, d_queued, d_in_progress, d_waiting)
    SELECT g.grain, date_trunc(g.unit, e.at, 'UTC'), e.type,
           sum(e.completed), sum(e.failed), sum(e.dq), sum(e.dip), sum(e.dwa)
      FROM (SELECT c.type, now() AS at, 0 AS completed, 0 AS failed,
                   (c.new_status IS NOT DISTINCT FROM 'queued')::int - (c.old_status IS NOT DISTINCT FROM 'queued')::int AS dq,
                   (c.new_status IS NOT DISTINCT FROM 'in_progress')::int
                       - (c.old_status IS NOT DISTINCT FROM 'in_progress')::int AS dip,
                   (c.new_status IS NOT DISTINCT FROM 'waiting_approval')::int
                       - (c.old_status IS NOT DISTINCT FROM 'waiting_approval')::int AS dwa
              FROM unnest(changes) c
             WHERE c.new_status IN ('queued', 'in_progress', 'waiting_approval')
                OR c.old_status IN ('queued', 'in_progress', 'waiting_approval')
            UNION ALL
            SELECT c.type, coalesce(c.finished_at, now()), (c.new_status = 'completed')::int,
                   (c.new_status = 'failed')::int, 0, 0, 0
              FROM unnest(changes) c
             WHERE c.new_status IN ('completed', 'failed')) e
     CROSS JOIN (VALUES ('m', 'minute'), ('h', 'hour')) g(grain, unit)
     GROUP BY 1, 2, 3
     ORDER BY 1, 2, 3
    ON CONFLICT (grain, bucket, type) DO UPDATE
       SET completed = t.completed + EXCLUDED.completed, failed = t.failed + EXCLUDED.failed,
           d_queued = t.d_queued + EXCLUDED.d_queued, d_in_progress = t.d_in_progress + EXCLUDED.d_in_progress,
           d_waiting = t.d_waiting + EXCLUDED.d_waiting;

    INSERT INTO job_stats_hist AS t (grain, bucket, type, metric, bin, n)
    SELECT g.grain, date_trunc(g.unit, coalesce(c.finished_at, now()), 'UTC'), c.type, m.metric,
           jobdesk_stats_bin(m.secs), count(*)
      FROM unnest(changes) c
     CROSS JOIN LATERAL (VALUES ('wait', c.wait_s), ('run', c.run_s)) m(metric, secs)
     CROSS JOIN (VALUES ('m', 'minute'), ('h', 'hour'), ('d', 'day')) g(grain, unit)
     WHERE m.secs IS NOT NULL
     GROUP BY 1, 2, 3, 4, 5
     ORDER BY 1, 2, 4, 3, 5
    ON CONFLICT (grain, bucket, metric, type, bin) DO UPDATE SET n = t.n + EXCLUDED.n;
END $$;

-- An attempt ends when a running job completes, fails, waits for approval or goes back to the
-- queue to be retried (a job put back by a stopping worker gives its attempt back: not counted).
-- Its wait ran from enqueue, or from the time its retry was due, to its start.
CREATE FUNCTION jobdesk_stats_on_update() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    changes jobdesk_job_change[];
BEGIN
    SELECT array_agg(ROW(n.type, o.status, n.status, x.at,
                         CASE WHEN x.ended THEN greatest(0, extract(epoch FROM
                              o.started_at - greatest(o.created_at, o.next_retry_at))) END,
                         CASE WHEN x.ended THEN greatest(0, extract(epoch FROM x.at - o.started_at)) END
                     )::jobdesk_job_change)
      INTO changes
      FROM stats_old o JOIN stats_new n ON n.id = o.id
     CROSS JOIN LATERAL (SELECT CASE WHEN n.status = 'completed' THEN coalesce(n.completed_at, now())
                                     ELSE now() END AS at,
                                o.status = 'in_progress' AND o.started_at IS NOT NULL AND n.attempts = o.attempts
                                AND n.status IN ('completed', 'failed', 'waiting_approval', 'queued') AS ended) x
     WHERE o.status <> n.status;
    IF changes IS NOT NULL THEN
        PERFORM jobdesk_stats_record(changes);
    END IF;
    RETURN NULL;
END $$;

-- Inserted rows count too; a row inserted already finished (an import, a backfill) counts at
-- its own completion time, with its attempt's wait and run.
CREATE FUNCTION jobdesk_stats_on_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    changes jobdesk_job_change[];
BEGIN
    SELECT array_agg(ROW(n.type, NULL, n.status, x.at,
                         CASE WHEN x.ended THEN greatest(0, extract(epoch FROM n.started_at - n.created_at)) END,
                         CASE WHEN x.ended THEN greatest(0, extract(epoch FROM x.at - n.started_at)) END
                     )::jobdesk_job_change)
      INTO changes
      FROM stats_new n
     CROSS JOIN LATERAL (SELECT CASE WHEN n.status = 'completed' THEN coalesce(n.completed_at, n.updated_at)
                                     ELSE n.updated_at END AS at,
                                n.started_at IS NOT NULL
                                AND n.status IN ('completed', 'failed', 'waiting_approval') AS ended) x;
    IF changes IS NOT NULL THEN
        PERFORM jobdesk_stats_record(changes);
    END IF;
    RETURN NULL;
END $$;

-- Deleted rows leave the counts; the history of what they did stays.
CREATE FUNCTION jobdesk_stats_on_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    changes jobdesk_job_change[];
BEGIN
    SELECT array_agg(ROW(o.type, o.status, NULL, NULL, NULL, NULL)::jobdesk_job_change)
      INTO changes FROM stats_old o;
    IF changes IS NOT NULL THEN
        PERFORM jobdesk_stats_record(changes);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION jobdesk_stats_on_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM job_status_counts;
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_stats_update AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS stats_old NEW TABLE AS stats_new
    FOR EACH STATEMENT EXECUTE FUNCTION jobdesk_stats_on_update();
CREATE TRIGGER jobs_stats_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS stats_new
    FOR EACH STATEMENT EXECUTE FUNCTION jobdesk_stats_on_insert();
CREATE TRIGGER jobs_stats_delete AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS stats_old
    FOR EACH STATEMENT EXECUTE FUNCTION jobdesk_stats_on_delete();
CREATE TRIGGER jobs_stats_truncate AFTER TRUNCATE ON jobs
    FOR EACH STATEMENT EXECUTE FUNCTION jobdesk_stats_on_truncate();

-- The jobs already there: those finished in the last 8 days go into the history (by the insert
-- trigger's own rule, so both agree), then every job is counted by status.
SELECT jobdesk_stats_record(array_agg(ROW(j.type, NULL, j.status, x.at,
           CASE WHEN x.ended THEN greatest(0, extract(epoch FROM j.started_at - j.created_at)) END,
           CASE WHEN x.ended THEN greatest(0, extract(epoch FROM x.at - j.started_at)) END)::jobdesk_job_change))
  FROM jobs j
 CROSS JOIN LATERAL (SELECT CASE WHEN j.status = 'completed' THEN coalesce(j.completed_at, j.updated_at)
                                 ELSE j.updated_at END AS at,
                            j.started_at IS NOT NULL AND j.status IN ('completed', 'failed') AS ended) x
 WHERE j.status IN ('completed', 'failed') AND x.at > now() - interval '8 days'
HAVING count(*) > 0;
DELETE FROM job_status_counts;
INSERT INTO job_status_counts (status, shard, n) SELECT status, 0, count(*) FROM jobs GROUP BY status;

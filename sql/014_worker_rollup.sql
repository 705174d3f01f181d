-- jobdesk schema, part 14: the workers keep the metrics rollup, not triggers on `jobs`.
--
-- The statement triggers of part 11 ran on every claim and every completion: they copied the
-- changed rows into transition tables and upserted minute rows that every worker shares, which
-- cost the engine about a quarter of its throughput. Now:
--   job_stats (completed, failed) and job_stats_hist (wait and run bins) are written by the
--     workers, which fold what their attempts did per minute and type in memory and add it in one
--     statement about once a second (worker/stats_rollup.py);
--   job_queue_depth holds the queue depth by status once per UTC minute, counted by whichever
--     worker comes first in that minute; the depth now is counted when it is read.
-- The d_* columns of job_stats and job_status_counts are no longer written; readers ignore them.

DROP TRIGGER jobs_stats_update ON jobs;
DROP TRIGGER jobs_stats_insert ON jobs;
DROP TRIGGER jobs_stats_delete ON jobs;
DROP TRIGGER jobs_stats_truncate ON jobs;
DROP FUNCTION jobdesk_stats_on_update();
DROP FUNCTION jobdesk_stats_on_insert();
DROP FUNCTION jobdesk_stats_on_delete();
DROP FUNCTION jobdesk_stats_on_truncate();
DROP FUNCTION jobdesk_stats_record(jobdesk_job_change[]);
DROP TYPE jobdesk_job_change;
DROP TABLE job_status_counts;

CREATE TABLE job_queue_depth (
    bucket  timestamptz NOT NULL,   -- the UTC minute the count was taken in
    status  varchar(32) NOT NULL,   -- queued, in_progress, waiting_approval
    n       bigint      NOT NULL,
    PRIMARY KEY (status, bucket)    -- a chart reads the last count before each of its points
);

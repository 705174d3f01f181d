-- jobdesk schema, part 7: retention.
--
-- The pruner deletes finished jobs once their retention has passed (`JOB_RETENTION_*`). It finds
-- them through a partial index on when they last changed, so a run that has nothing to delete
-- reads a few index pages, however many jobs the table keeps. Live jobs are not in it.
CREATE INDEX jobs_finished_idx ON jobs (status, updated_at)
    WHERE status IN ('completed', 'cancelled', 'failed');

-- Leases: one row per fleet-wide duty that one worker at a time performs (the pruner). A
-- lease is a row, not an advisory lock, so it works through a pooler in transaction mode.
-- `expires_at` ends a holder's claim even if it dies; `last_run_at` paces the duty fleet-wide.
CREATE TABLE jobdesk_leases (
    name         text        PRIMARY KEY,
    holder       text,
    expires_at   timestamptz NOT NULL DEFAULT now(),
    last_run_at  timestamptz
);
INSERT INTO jobdesk_leases (name) VALUES ('pruner');

-- jobdesk schema, part 10: group failures by the fingerprint of their error.
--
-- `error_fingerprint` is the error's first line with numbers, ids and quoted values replaced by
-- placeholders (worker/fingerprint.py), written beside `error_message` wherever the engine
-- writes an error. Rows written before this migration keep NULL: the Failures view groups them
-- under the first line of their error as it is. NULL by default, so plain INSERTs keep working.

ALTER TABLE jobs ADD COLUMN error_fingerprint text;
ALTER TABLE job_attempts ADD COLUMN error_fingerprint text;

-- The Failures view counts failed jobs per fingerprint and type, with their first and last
-- time, from this index alone (an index-only scan), however large the table. The same index
-- finds a group's failed jobs, and the old rows without a fingerprint (IS NULL).
CREATE INDEX jobs_failed_fingerprint_idx ON jobs (error_fingerprint, type, updated_at)
    WHERE status = 'failed';

-- A group's jobs in the job table, whatever their status, newest first.
CREATE INDEX jobs_error_fingerprint_idx ON jobs (error_fingerprint, seq)
    WHERE error_fingerprint IS NOT NULL;

-- Failed attempts of the last 24 hours: the newest rows of an append-only table.
CREATE INDEX job_attempts_failed_recent_idx ON job_attempts (finished_at)
    WHERE outcome IN ('failed', 'lost', 'interrupted');

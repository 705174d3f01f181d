-- jobdesk schema, part 10: group failures by the fingerprint of their error.
--
-- `error_fingerprint` is the error's first line with numbers, ids and quoted values replaced by
-- placeholders (worker/fingerprint.py), written beside `error_message` wherever the engine
-- writes an error. Rows written before this migration keep NULL: the Failures view groups them
-- under the first line of their error as it is. NULL by default, so plain INSERTs keep working.

ALTER TABLE jobs ADD COLUMN error_fingerprint text;
ALTER TABLE job_attempts ADD COLUMN error_fingerprint text;
-- The attempt's job type, copied when the attempt is written, so that grouping the attempts of
-- the last day reads no job rows. NULL on old rows (then the job row is read).
ALTER TABLE job_attempts ADD COLUMN job_type varchar(255);

-- The Failures view counts failed jobs per fingerprint and type, with their first and last
-- time, from this index alone (an index-only scan), however large the table. The same index
-- finds a group's failed jobs, and the old rows without a fingerprint (IS NULL).
CREATE INDEX jobs_failed_fingerprint_idx ON jobs (error_fingerprint, type, updated_at)
    WHERE status = 'failed';

-- Old failed rows without a fingerprint: none on a new install, so grouping them costs nothing.
CREATE INDEX jobs_failed_unprinted_idx ON jobs (type) WHERE status = 'failed' AND error_fingerprint IS NULL;

-- A group's jobs in the job table, whatever their status, newest first.
CREATE INDEX jobs_error_fingerprint_idx ON jobs (error_fingerprint, seq)
    WHERE error_fingerprint IS NOT NULL;

-- Old rows without a fingerprint, by the first line of their error (how they group).
CREATE INDEX jobs_raw_error_idx ON jobs ((left(split_part(error_message, E'\n', 1), 300)), seq)
    WHERE error_fingerprint IS NULL AND error_message IS NOT NULL;

-- Failed attempts of the last 24 hours, grouped from this index alone.
CREATE INDEX job_attempts_failed_recent_idx ON job_attempts (finished_at) INCLUDE (error_fingerprint, job_type)
    WHERE outcome IN ('failed', 'lost', 'interrupted');

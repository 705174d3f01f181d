-- jobdesk schema, part 19: a queued job's `scheduled_at` changed by plain SQL moves its start.
--
-- The claim reads `run_at` (part 6), which only the insert trigger derived from `scheduled_at`
-- and `next_retry_at`. So `UPDATE jobs SET scheduled_at = ...` on a queued job changed nothing:
-- a job put off kept its place, and a job brought forward still waited. Now it moves either way;
-- a time that has come makes the job runnable at once, and idle workers are told.
--
-- An AFTER trigger on that column alone: the engine's own updates never set it, so they do not
-- even look at this trigger's condition (a BEFORE UPDATE trigger would make every update of a
-- job fetch and lock its row once more).

CREATE FUNCTION jobdesk_jobs_rescheduled() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    due timestamptz := GREATEST(NEW.next_retry_at, NEW.scheduled_at);
    at  timestamptz := CASE WHEN due > now() THEN due END;
BEGIN
    UPDATE jobs SET run_at = at
     WHERE id = NEW.id AND status = 'queued' AND run_at IS DISTINCT FROM at;
    IF FOUND AND at IS NULL THEN
        PERFORM pg_notify('jobdesk_new_jobs', '');
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_rescheduled AFTER UPDATE OF scheduled_at ON jobs
    FOR EACH ROW WHEN (NEW.status = 'queued' AND NEW.scheduled_at IS DISTINCT FROM OLD.scheduled_at)
    EXECUTE FUNCTION jobdesk_jobs_rescheduled();

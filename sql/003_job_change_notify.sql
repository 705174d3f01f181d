-- jobdesk schema, part 3: push the ids of changed jobs to consoles.
--
-- One NOTIFY per statement on channel `jobdesk_job_changes`, whose payload is the changed ids
-- separated by commas, or `*` when a statement changed too many rows to list (a console then
-- reloads what it shows). Per statement, not per row, so a worker's batched claims and
-- completions cost one notification each.

CREATE FUNCTION jobdesk_notify_job_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    changed integer;
    ids     text;
BEGIN
    SELECT count(*), string_agg(id, ',') INTO changed, ids
      FROM (SELECT id FROM changed_rows LIMIT 151) c;
    IF changed = 0 THEN
        RETURN NULL;
    END IF;
    -- NOTIFY payloads are limited to 8000 bytes: 150 ids of 36 characters fit comfortably.
    PERFORM pg_notify('jobdesk_job_changes', CASE WHEN changed > 150 THEN '*' ELSE ids END);
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_notify_changes_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobdesk_notify_job_changes();

CREATE TRIGGER jobs_notify_changes_update AFTER UPDATE ON jobs
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobdesk_notify_job_changes();

-- Deleted rows: the console drops them from its table.
CREATE TRIGGER jobs_notify_changes_delete AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobdesk_notify_job_changes();

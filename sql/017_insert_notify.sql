-- jobdesk schema, part 17: a transaction that inserts jobs row by row notifies as one batch does.
--
-- A backend that enqueues with one INSERT per row (executemany) runs the statement trigger of
-- part 6 once per row. Each call named its row's id on `jobdesk_job_changes`, so a transaction
-- of 20,000 rows queued 20,000 distinct notifications, and every listener read them all.
-- Now the trigger counts, in a setting local to the transaction, the ids it has named: past
-- 150 it says '*' once (listeners read again, as for a large batch) and its later calls return
-- at once. `jobdesk_new_jobs` is still sent with the first statement, and notifications are
-- still delivered at commit. A savepoint rolled back takes its notifications and its count back.

CREATE OR REPLACE FUNCTION jobdesk_notify_inserted_jobs() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    named   integer := coalesce(nullif(current_setting('jobdesk.ids_notified', true), '')::integer, 0);
    changed integer;
    ids     text;
BEGIN
    IF named > 150 THEN
        RETURN NULL;  -- this transaction already said '*'
    END IF;
    SELECT count(*), string_agg(id, ',') INTO changed, ids
      FROM (SELECT id FROM changed_rows LIMIT 151) c;
    IF changed = 0 THEN
        PERFORM pg_notify('jobdesk_new_jobs', '');
        RETURN NULL;
    END IF;
    named := named + changed;
    -- NOTIFY payloads are limited to 8000 bytes: 150 ids of 36 characters fit comfortably.
    PERFORM pg_notify('jobdesk_job_changes', CASE WHEN named > 150 THEN '*' ELSE ids END),
            pg_notify('jobdesk_new_jobs', ''),
            set_config('jobdesk.ids_notified', named::text, true);
    RETURN NULL;
END $$;

-- PostgreSQL 18 makes UUIDv7 ids itself, in C, a third faster than our portable SQL version;
-- the ids are the same kind (time-ordered, version 7, variant bits set). Older servers keep ours.
DO $$
BEGIN
    IF current_setting('server_version_num')::integer >= 180000 THEN
        EXECUTE 'CREATE OR REPLACE FUNCTION jobdesk_uuid7() RETURNS text LANGUAGE sql VOLATILE AS '
                '$f$ SELECT uuidv7()::text $f$';
    END IF;
END $$;

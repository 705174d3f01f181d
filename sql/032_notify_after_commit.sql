-- jobdesk schema, part 32: an enqueue that must be durable can send its notifications after its commit.
--
-- PostgreSQL serializes the commits of the transactions that NOTIFY: each holds one lock of the
-- whole cluster's notification queue from just before its commit record until its end, through
-- the commit's WAL flush. The HTTP API's group commit of enqueues flushes (an answered enqueue is
-- durable), so while it flushed, every worker's claim and completion, which also notify, waited
-- in line behind it, and it behind them.
--
-- A transaction that sets `jobdesk.notify_after_commit` to 'on' (local to it) sends none from
-- this trigger; its caller sends the same notifications (`jobdesk_job_changes` with the ids, or
-- '*' past 150, and `jobdesk_new_jobs` with part 31's '<highest priority>:<lowest seq>' of the
-- rows) in a transaction of their own right after the commit,
-- which writes nothing and holds that lock for no flush. Should the caller die between the two,
-- the jobs are committed all the same: workers find them at their next poll, and listeners at
-- their next change. Every other insert notifies at its commit, as before.

CREATE OR REPLACE FUNCTION jobdesk_notify_inserted_jobs() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    named   integer := coalesce(nullif(current_setting('jobdesk.ids_notified', true), '')::integer, 0);
    told    integer := nullif(current_setting('jobdesk.floor_notified', true), '')::integer;
    changed integer;
    ids     text;
    top     integer;
    low     bigint;
BEGIN
    IF current_setting('jobdesk.notify_after_commit', true) = 'on' THEN
        RETURN NULL;  -- its caller notifies after the commit
    END IF;
    SELECT max(priority), min(seq) INTO top, low FROM changed_rows;
    IF top IS NULL THEN
        PERFORM pg_notify('jobdesk_new_jobs', '');
        RETURN NULL;
    END IF;
    IF told IS NULL OR top > told THEN
        PERFORM pg_notify('jobdesk_new_jobs', top || ':' || low),
                set_config('jobdesk.floor_notified', top::text, true);
    END IF;
    IF named > 150 THEN
        RETURN NULL;  -- this transaction already said '*'
    END IF;
    SELECT count(*), string_agg(id, ',') INTO changed, ids
      FROM (SELECT id FROM changed_rows LIMIT 151) c;
    named := named + changed;
    -- NOTIFY payloads are limited to 8000 bytes: 150 ids of 36 characters fit comfortably.
    PERFORM pg_notify('jobdesk_job_changes', CASE WHEN named > 150 THEN '*' ELSE ids END),
            set_config('jobdesk.ids_notified', named::text, true);
    RETURN NULL;
END $$;

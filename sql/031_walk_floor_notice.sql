-- Walk floors (worker/store/transitions/floors.py): a worker starts each type's walk of the
-- runnable jobs at the (priority, seq) of the first job its last walk claimed, past the entries
-- of the jobs claimed before, which a transaction that holds vacuum back leaves in
-- jobs_ready_idx. News of a job that may be below a floor clears the worker's floors.
--
-- The news of an insert now says how low its jobs go in walk order: '<highest priority>:<lowest
-- seq>' of the statement's rows. A worker lowers its floors to that instead of clearing them, so
-- that under a steady trickle of new jobs (each above the floors) the floors hold, which is when
-- they matter; and a job of a long enqueue that commits after later jobs were claimed is below
-- the floors by its seq, and lowers them to it. Every other notice on jobdesk_new_jobs keeps its
-- empty payload, which clears the floors.
--
-- A transaction says it once, as before, unless a later statement's jobs come before it in walk
-- order: those of one session have ever higher seqs, so only a higher priority does. (A
-- transaction of row-by-row inserts still sends one notice, not one per row.) The priority told
-- is kept in the transaction's own setting, which a rolled-back savepoint takes back with the
-- notice it sent.
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

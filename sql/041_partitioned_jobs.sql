-- jobdesk schema, part 41: `jobs` partitioned, so that retention drops partitions instead of
-- deleting rows (docs/scale.md says why this design and not another).
--
--   jobs                       PARTITION BY LIST (status)
--   ├── jobs_live              queued, in_progress, waiting_approval
--   ├── jobs_failed_cancelled  failed, cancelled: few, kept longer; pruned row by row as before
--   ├── jobs_completed         completed, PARTITION BY RANGE (retain_from)
--   │   ├── jobs_completed_start    FROM (MINVALUE) TO (this migration's time)
--   │   ├── jobs_completed_YYYYMMDD_HHMISS ...   made ahead by the workers
--   │   └── jobs_completed_later    FROM (the last bound) TO (MAXVALUE): a job never misses a home
--   └── jobs_other             DEFAULT: always empty; a bad status meets jobs_status_check there
--
-- One table named `jobs` still takes every INSERT, SELECT and UPDATE by plain SQL. A status
-- change that crosses a line moves the row (a retry brings a completed job back to jobs_live).
--
-- `retain_from`: when a completed job's retention starts. Set to now() when a job completes (by
-- the engine in its UPDATE; by the trigger below for a plain-SQL UPDATE); moved forward only for a
-- job that must outlive its partition (one an unfinished job still depends on).
--
-- Ids stay unique across the table: each partition has its own primary key on `id`, and a
-- statement trigger checks new rows against the other partitions (jobdesk_jobs_check_ids).
--
-- Unique keys: jobs_unique_key_idx lives on jobs_live (every status that holds a key is live).
-- A partitioned table's arbiter index must contain its partition key, so plain SQL writes
-- `ON CONFLICT DO NOTHING` (no target) for "insert unless one exists".
--
-- This migration copies the rows of an unpartitioned `jobs` in one transaction. On a large table
-- with workers running, `jobdesk migrate` copies them beforehand while the workers go on, and
-- this transaction only catches up and swaps the names (jobdesk.store.partition_migrate).

-- 1. The partitioned table beside `jobs`, with every index (under a name of its own until the swap).
--    `jobdesk migrate` makes it ahead of this transaction on a large table (see above).
DO $$
DECLARE
    first_bound timestamptz := date_trunc('second', now());
    part text;
BEGIN
    IF to_regclass('jobs_partitioned') IS NOT NULL THEN
        RETURN;  -- made ahead
    END IF;
    CREATE TABLE jobs_partitioned (LIKE jobs INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING IDENTITY
                                   INCLUDING STORAGE INCLUDING COMMENTS) PARTITION BY LIST (status);
    ALTER TABLE jobs_partitioned ADD COLUMN retain_from timestamptz NOT NULL DEFAULT now();
    CREATE TABLE jobs_live PARTITION OF jobs_partitioned FOR VALUES IN ('queued', 'in_progress', 'waiting_approval');
    CREATE TABLE jobs_failed_cancelled PARTITION OF jobs_partitioned FOR VALUES IN ('failed', 'cancelled');
    CREATE TABLE jobs_completed PARTITION OF jobs_partitioned FOR VALUES IN ('completed')
        PARTITION BY RANGE (retain_from);
    CREATE TABLE jobs_other PARTITION OF jobs_partitioned DEFAULT;
    EXECUTE format('CREATE TABLE jobs_completed_start PARTITION OF jobs_completed '
                   'FOR VALUES FROM (MINVALUE) TO (%L)', first_bound);
    EXECUTE format('CREATE TABLE jobs_completed_later PARTITION OF jobs_completed '
                   'FOR VALUES FROM (%L) TO (MAXVALUE)', first_bound);
    FOREACH part IN ARRAY ARRAY['jobs_live', 'jobs_failed_cancelled', 'jobs_completed_start',
                                'jobs_completed_later', 'jobs_other'] LOOP
        EXECUTE format('ALTER TABLE %I ADD PRIMARY KEY (id)', part);
    END LOOP;
    -- Indexes of every partition (a partition's own copy of each is made when it is attached).
    CREATE INDEX jobs_partitioned_status_idx ON jobs_partitioned (status, seq) WHERE status <> 'in_progress';
    CREATE INDEX jobs_partitioned_id_tail_idx ON jobs_partitioned (right(id, 8));
    CREATE INDEX jobs_partitioned_pipeline_idx ON jobs_partitioned (pipeline_id, seq) WHERE pipeline_id IS NOT NULL;
    CREATE INDEX jobs_partitioned_pipeline_recent_idx ON jobs_partitioned (seq DESC) WHERE pipeline_id IS NOT NULL;
    CREATE INDEX jobs_partitioned_input_data_path_idx ON jobs_partitioned USING gin (input_data jsonb_path_ops)
        WHERE input_data <> '{}'::jsonb;
    CREATE INDEX jobs_partitioned_error_fingerprint_idx ON jobs_partitioned (error_fingerprint, seq)
        WHERE error_fingerprint IS NOT NULL;
    CREATE INDEX jobs_partitioned_raw_error_idx ON jobs_partitioned ((left(split_part(error_message, E'\n', 1), 300)), seq)
        WHERE error_fingerprint IS NULL AND error_message IS NOT NULL;
    -- A partition's own, where its rows are: the claim's (queued jobs), running and held jobs,
    -- unique keys (held by live jobs only); the Failures view's, and the pruner's way to the
    -- failed and cancelled jobs past their retention (completed ones go a partition at a time).
    CREATE INDEX jobs_partitioned_ready_idx ON jobs_live (type, priority DESC, seq)
        WHERE status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL;
    CREATE INDEX jobs_partitioned_user_ready_idx ON jobs_live (type, priority DESC, COALESCE(user_id, 0), seq)
        WHERE status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL;
    CREATE INDEX jobs_partitioned_waiting_idx ON jobs_live (run_at)
        WHERE status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NOT NULL;
    CREATE INDEX jobs_partitioned_in_progress_worker_idx ON jobs_live (worker_id) WHERE status = 'in_progress';
    CREATE INDEX jobs_partitioned_waiting_approval_idx ON jobs_live (updated_at) WHERE status = 'waiting_approval';
    CREATE UNIQUE INDEX jobs_partitioned_unique_key_idx ON jobs_live (unique_key)
        WHERE unique_key IS NOT NULL AND status IN ('queued', 'in_progress', 'waiting_approval');
    CREATE INDEX jobs_partitioned_failed_fingerprint_idx ON jobs_failed_cancelled (error_fingerprint, type, updated_at)
        WHERE status = 'failed';
    CREATE INDEX jobs_partitioned_failed_unprinted_idx ON jobs_failed_cancelled (type)
        WHERE status = 'failed' AND error_fingerprint IS NULL;
    CREATE INDEX jobs_partitioned_finished_idx ON jobs_failed_cancelled (status, updated_at);
END $$;

-- 2. The rows, and the swap. Made ahead, the table holds every row already: the trigger that kept
--    it in step (jobdesk_jobs_mirror) goes, and this transaction holds `jobs` for a moment only.
--    Otherwise the rows are copied here: a completed job's retention starts when it last changed,
--    as the pruner counted it until now.
LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE;
DO $$
BEGIN
    IF to_regprocedure('jobdesk_jobs_mirror()') IS NULL THEN
        INSERT INTO jobs_partitioned OVERRIDING SYSTEM VALUE SELECT j.*, j.updated_at FROM jobs j;
    ELSE
        IF obj_description('jobs_partitioned'::regclass, 'pg_class') IS DISTINCT FROM 'jobdesk: every row copied' THEN
            INSERT INTO jobs_partitioned OVERRIDING SYSTEM VALUE  -- the copy ahead did not finish
            SELECT j.*, j.updated_at FROM jobs j WHERE NOT EXISTS (SELECT 1 FROM jobs_partitioned p WHERE p.id = j.id);
        END IF;
        DROP TRIGGER jobs_mirror ON jobs;
        DROP FUNCTION jobdesk_jobs_mirror();
        COMMENT ON TABLE jobs_partitioned IS NULL;
    END IF;
END $$;
SELECT setval(pg_get_serial_sequence('jobs_partitioned', 'seq'), s.last_value, s.is_called)
  FROM jobs_seq_seq s;
-- What roles other than the owner were granted on `jobs` and its sequence (`jobdesk grant`), they
-- have on the new table, its partitions (the engine names jobs_live) and its sequence.
DO $$
DECLARE
    r    record;
    part text;
BEGIN
    FOR r IN SELECT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE quote_ident(a.grantee::regrole::text) END AS grantee,
                    a.privilege_type, c.relkind
               FROM pg_class c, aclexplode(c.relacl) a
              WHERE c.oid IN ('jobs'::regclass, 'jobs_seq_seq'::regclass) AND a.grantee <> c.relowner LOOP
        IF r.relkind = 'S' THEN
            EXECUTE format('GRANT %s ON SEQUENCE jobs_partitioned_seq_seq TO %s', r.privilege_type, r.grantee);
            CONTINUE;
        END IF;
        FOR part IN SELECT relid::regclass::text FROM pg_partition_tree('jobs_partitioned') LOOP
            EXECUTE format('GRANT %s ON TABLE %s TO %s', r.privilege_type, part, r.grantee);
        END LOOP;
    END LOOP;
END $$;

DROP TABLE jobs;
ALTER TABLE jobs_partitioned RENAME TO jobs;
ALTER SEQUENCE jobs_partitioned_seq_seq RENAME TO jobs_seq_seq;
ALTER TABLE jobs RENAME CONSTRAINT jobs_partitioned_retain_from_not_null TO jobs_retain_from_not_null;
DO $$
DECLARE
    idx text;
BEGIN
    FOR idx IN SELECT c.relname FROM pg_class c
                WHERE c.relkind IN ('i', 'I') AND c.relname LIKE 'jobs\_partitioned\_%'
                  AND c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = 'jobs'::regclass) LOOP
        EXECUTE format('ALTER INDEX %I RENAME TO %I', idx, 'jobs_' || substr(idx, length('jobs_partitioned_') + 1));
    END LOOP;
END $$;

-- What the last pruner run did (`jobdesk prune` and the console show it).
ALTER TABLE jobdesk_leases ADD COLUMN last_result jsonb;

-- A completed partition for [lower, upper), made empty beside `jobs_completed` and then attached,
-- which locks the parent only in SHARE UPDATE EXCLUSIVE mode. With `strays` (a detached
-- jobs_completed_later), the rows of that range move from there into it before it is attached,
-- so no trigger sees them again.
CREATE FUNCTION jobdesk_make_completed_partition(lower timestamptz, upper timestamptz, strays regclass DEFAULT NULL)
    RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    name text := 'jobs_completed_' || to_char(lower AT TIME ZONE 'UTC', 'YYYYMMDD_HH24MISS');
BEGIN
    EXECUTE format('CREATE TABLE %I (LIKE jobs_completed INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', name);
    EXECUTE format('ALTER TABLE %I ADD PRIMARY KEY (id)', name);
    IF strays IS NOT NULL THEN
        EXECUTE format('WITH moved AS (DELETE FROM %s WHERE retain_from >= $1 AND retain_from < $2 RETURNING *) '
                       'INSERT INTO %I SELECT * FROM moved', strays, name) USING lower, upper;
    END IF;
    EXECUTE format('ALTER TABLE jobs_completed ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                   name, lower, upper);
    RETURN name;
END $$;

-- Partitions of `width_s` seconds (bounds on its multiples) made until `until`, all in one
-- statement, so that the moment `jobs_completed_later` is detached (a lock of `jobs_completed`,
-- which completions wait for, never claims nor inserts) lasts no longer than the statement:
-- at most `lock_timeout_ms` waiting for it, then nothing is done (the next round tries again).
-- Rows that landed in `later` meanwhile move to the partitions made for them. Nothing either when
-- the partitions reach `until` already, or another session is making them.
CREATE FUNCTION jobdesk_make_partitions_ahead(width_s float8, until timestamptz, lock_timeout_ms integer DEFAULT 200)
    RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    low  timestamptz;
    high timestamptz;
    made text[] := '{}';
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext('jobdesk: make partitions'))
       OR (SELECT p.lower FROM jobdesk_completed_partitions() p WHERE p.name = 'jobs_completed_later') >= until THEN
        RETURN made;
    END IF;
    PERFORM set_config('lock_timeout', lock_timeout_ms::text, true);
    ALTER TABLE jobs_completed DETACH PARTITION jobs_completed_later;
    SELECT max(p.upper) INTO low FROM jobdesk_completed_partitions() p;
    WHILE low < until LOOP
        high := to_timestamp((floor(extract(epoch FROM low) / width_s) + 1) * width_s);
        made := made || jobdesk_make_completed_partition(low, high, 'jobs_completed_later');
        low := high;
    END LOOP;
    EXECUTE format('ALTER TABLE jobs_completed ATTACH PARTITION jobs_completed_later FOR VALUES FROM (%L) TO (MAXVALUE)',
                   low);
    RETURN made;
END $$;

-- The completed partitions, oldest first, with their bounds (NULL: MINVALUE or MAXVALUE).
CREATE FUNCTION jobdesk_completed_partitions(OUT name text, OUT lower timestamptz, OUT upper timestamptz,
                                             OUT detaching boolean)
    RETURNS SETOF record LANGUAGE sql STABLE AS $$
    SELECT c.relname::text,
           nullif(substring(pg_get_expr(c.relpartbound, c.oid) FROM 'FROM \(''([^'']+)''\)'), '')::timestamptz,
           nullif(substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \(''([^'']+)''\)'), '')::timestamptz,
           i.inhdetachpending
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = 'jobs_completed'::regclass
     ORDER BY 2 NULLS FIRST
$$;

-- When a job's id was made from a clock (a UUIDv7, as jobdesk makes them), no job with that id
-- can have completed before it: the id check reads only the completed partitions from then on
-- (less a day, for clocks that disagree). Any other id is looked for everywhere.
CREATE FUNCTION jobdesk_id_born(id text) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-7'
                THEN to_timestamp(('x' || lpad(left(replace(id, '-', ''), 12), 16, '0'))::bit(64)::bigint / 1000.0)
                     - interval '1 day'
                ELSE '-infinity' END
$$;

-- New rows against the other partitions: a partition's primary key sees only its own rows. Not
-- for a statement of jobdesk's enqueue whose ids it made itself (UUIDv7s with 74 random bits, which
-- it marks with jobdesk.fresh_ids), which no job can already have. A row
-- inserted live races no finished one (the finished row it could clash with is either visible
-- here or still locked by its move, which jobs_live's key waits for); statements that insert
-- rows already finished take turns, so that two of them cannot pass each other.
CREATE FUNCTION jobdesk_jobs_check_ids() RETURNS trigger
    LANGUAGE plpgsql SET plan_cache_mode TO 'auto' AS $$
DECLARE
    dup text;
BEGIN
    IF current_setting('jobdesk.fresh_ids', true) = 'on' THEN
        -- Said by jobdesk's enqueue of jobs whose ids it has just made, for this statement alone.
        PERFORM set_config('jobdesk.fresh_ids', '', true);
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM new_ids n WHERE n.status NOT IN ('queued', 'in_progress', 'waiting_approval')) THEN
        PERFORM pg_advisory_xact_lock(hashtext('jobdesk: finished jobs inserted'));
        SELECT n.id INTO dup FROM new_ids n JOIN jobs j ON j.id = n.id GROUP BY n.id HAVING count(*) > 1 LIMIT 1;
    ELSE  -- all live: jobs_live's primary key has seen to the live ones
        SELECT n.id INTO dup FROM new_ids n
         WHERE EXISTS (SELECT 1 FROM jobs_failed_cancelled f WHERE f.id = n.id)
            OR EXISTS (SELECT 1 FROM jobs_completed c WHERE c.id = n.id AND c.retain_from >= jobdesk_id_born(n.id))
         LIMIT 1;
    END IF;
    IF dup IS NOT NULL THEN
        RAISE EXCEPTION 'duplicate key value violates unique constraint "jobs_pkey"'
            USING ERRCODE = 'unique_violation', DETAIL = format('Key (id)=(%s) already exists.', dup),
                  CONSTRAINT = 'jobs_pkey', TABLE = 'jobs';
    END IF;
    RETURN NULL;
END $$;

-- A plain-SQL UPDATE that completes a job without setting retain_from: its retention starts now.
CREATE FUNCTION jobdesk_jobs_retain_from() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    NEW.retain_from := now();
    RETURN NEW;
END $$;

-- A locking read that meets a row moved to another partition by a concurrent change of status
-- (a parent completing as its dependant is inserted) fails with serialization_failure instead of
-- following it, as it follows a row updated in place. The insert's look-up of its parents reads
-- again then: in READ COMMITTED each read sees where the row went.
CREATE OR REPLACE FUNCTION jobdesk_jobs_before_insert() RETURNS trigger
    LANGUAGE plpgsql SET enable_seqscan TO 'off' SET plan_cache_mode TO 'auto' AS $$
DECLARE
    dep_ids    text[];
    found      integer;
    pending    integer;
    cancelled  text;
    unflagged  boolean;
    tries      integer := 0;
BEGIN
    IF current_setting('jobdesk.moving_in', true) = NEW.id THEN
        RETURN NEW;  -- not a new job: one coming back to jobs_live (jobdesk_jobs_moving_in)
    END IF;
    IF NEW.run_at IS NULL AND (NEW.next_retry_at > now() OR NEW.scheduled_at > now()) THEN
        NEW.run_at := GREATEST(NEW.next_retry_at, NEW.scheduled_at);
    END IF;
    IF NEW.dependent_on_jobs IS NULL OR jsonb_typeof(NEW.dependent_on_jobs) <> 'array'
       OR jsonb_array_length(NEW.dependent_on_jobs) = 0 THEN
        NEW.pending_deps := 0;
        RETURN NEW;
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(NEW.dependent_on_jobs) e
                WHERE jsonb_typeof(e) <> 'string') THEN
        RAISE EXCEPTION 'dependent_on_jobs of job % must be an array of job ids', NEW.id
            USING ERRCODE = 'JD001';
    END IF;
    SELECT array_agg(DISTINCT e) INTO dep_ids FROM jsonb_array_elements_text(NEW.dependent_on_jobs) e;
    IF NEW.id = ANY (dep_ids) THEN
        RAISE EXCEPTION 'job % depends on itself', NEW.id USING ERRCODE = 'JD002';
    END IF;
    LOOP
        BEGIN
            SELECT count(*), count(*) FILTER (WHERE j.status <> 'completed'),
                   min(j.id) FILTER (WHERE j.status = 'cancelled'), bool_or(NOT j.has_dependants)
              INTO found, pending, cancelled, unflagged
              FROM (SELECT id, status, has_dependants FROM jobs WHERE id = ANY (dep_ids) FOR NO KEY UPDATE) j;
            EXIT;
        EXCEPTION WHEN serialization_failure THEN
            tries := tries + 1;
            IF tries >= 5 OR current_setting('transaction_isolation') <> 'read committed' THEN
                RAISE;
            END IF;
        END;
    END LOOP;
    IF found < cardinality(dep_ids) THEN
        RAISE EXCEPTION 'job % depends on unknown job %', NEW.id,
            (SELECT min(d) FROM unnest(dep_ids) d WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE id = d))
            USING ERRCODE = 'JD003';
    END IF;
    IF unflagged THEN  -- the parents' first dependant: they are locked, so this is the only one
        UPDATE jobs SET has_dependants = true WHERE id = ANY (dep_ids) AND NOT has_dependants;
    END IF;
    NEW.pending_deps := pending;
    IF cancelled IS NOT NULL AND NEW.status = 'queued' THEN
        -- Not runnable from now; jobdesk_jobs_after_insert_edges makes it `cancelled` (a BEFORE
        -- trigger cannot send a row to another partition).
        NEW.is_active := false;
        NEW.error_message := 'cancelled: dependency ' || cancelled || ' was cancelled';
    END IF;
    RETURN NEW;
END $$;

-- The edges of a job with dependencies; and a queued one with a cancelled dependency, found by
-- the insert trigger or cancelled by this one earlier in the same statement (a batch inserts
-- parents first), is cancelled.
CREATE OR REPLACE FUNCTION jobdesk_jobs_after_insert_edges() RETURNS trigger
    LANGUAGE plpgsql SET enable_seqscan TO 'off' SET plan_cache_mode TO 'auto' AS $$
DECLARE
    cancelled text;
BEGIN
    INSERT INTO job_dependencies (job_id, depends_on_id)
    SELECT DISTINCT NEW.id, e FROM jsonb_array_elements_text(NEW.dependent_on_jobs) e
    ON CONFLICT DO NOTHING;  -- a job back for a retry has its edges
    IF NEW.status = 'queued' AND NOT NEW.is_active AND NEW.error_message LIKE 'cancelled: dependency %' THEN
        SELECT min(j.id) INTO cancelled FROM jobs j
         WHERE j.id = ANY (ARRAY(SELECT jsonb_array_elements_text(NEW.dependent_on_jobs)))
           AND j.status = 'cancelled';
        IF cancelled IS NOT NULL THEN
            UPDATE jobs SET status = 'cancelled', is_active = false,
                            error_message = COALESCE(error_message, 'cancelled: dependency ' || cancelled || ' was cancelled')
             WHERE id = NEW.id AND status = 'queued';
        END IF;
    END IF;
    RETURN NULL;
END $$;

-- An UPDATE that moves a row to another partition fires the BEFORE UPDATE row triggers of the
-- partition it leaves, then the DELETE row triggers there and the INSERT ones where it lands, not
-- the AFTER UPDATE ones. So:
-- * the insert triggers are jobs_live's alone (new jobs are live), and they know a job that comes
--   back from a finished partition (a retry) by the mark jobdesk_jobs_moving_in leaves;
-- * a job that finishes leaves jobs_live (or, failed and then completed by hand,
--   jobs_failed_cancelled): its dependants are released, and a parent waiting for it woken, from
--   there, once the row is seen where it went.
CREATE FUNCTION jobdesk_jobs_moving_in() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('jobdesk.moving_in', NEW.id, true);
    IF NEW.status = 'queued' AND NEW.pending_deps = 0 AND NEW.is_active THEN
        PERFORM pg_notify('jobdesk_new_jobs', '');  -- sent at the commit, as the move is then
    END IF;
    RETURN NEW;
END $$;

CREATE FUNCTION jobdesk_jobs_release_on_move() RETURNS trigger
    LANGUAGE plpgsql SET enable_seqscan TO 'off' SET plan_cache_mode TO 'auto' AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM jobs_completed WHERE id = OLD.id) THEN
        UPDATE jobs SET pending_deps = pending_deps - 1
         WHERE id = ANY (ARRAY(SELECT job_id FROM job_dependencies WHERE depends_on_id = OLD.id));
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION jobdesk_jobs_wake_parent_on_move() RETURNS trigger
    LANGUAGE plpgsql SET enable_seqscan TO 'off' SET plan_cache_mode TO 'auto' AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM jobs WHERE id = OLD.id AND status IN ('completed', 'failed', 'cancelled')) THEN
        RETURN NULL;  -- deleted, not finished
    END IF;
    PERFORM 1 FROM jobs WHERE id = OLD.spawned_by FOR UPDATE;
    UPDATE jobs p SET run_at = NULL, updated_at = now()
     WHERE p.id = OLD.spawned_by AND p.status = 'queued' AND p.run_at IS NOT NULL
       AND EXISTS (SELECT 1 FROM job_waits w
                    WHERE w.job_id = p.id AND w.attempt = p.attempts AND w.kind = 'jobs'
                      AND NOT EXISTS (SELECT 1 FROM jobs c WHERE c.id = ANY (w.child_ids)
                                         AND c.status NOT IN ('completed', 'failed', 'cancelled')));
    IF FOUND THEN
        PERFORM pg_notify('jobdesk_new_jobs', '');
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_before_insert BEFORE INSERT ON jobs_live FOR EACH ROW
    WHEN (NEW.dependent_on_jobs <> '[]'::jsonb OR NEW.pending_deps <> 0 OR NEW.next_retry_at IS NOT NULL
          OR NEW.scheduled_at IS NOT NULL)
    EXECUTE FUNCTION jobdesk_jobs_before_insert();
-- A new job's owner exists (and stays, locked as a foreign key would): checked as it enters
-- jobs_live, not at each move of a finished job, which would lock its owner's row each time.
CREATE TRIGGER jobs_new_user_check BEFORE INSERT ON jobs_live FOR EACH ROW
    WHEN (NEW.user_id <> 1) EXECUTE FUNCTION jobdesk_check_job_user();
CREATE TRIGGER jobs_after_insert_edges AFTER INSERT ON jobs_live FOR EACH ROW
    WHEN (jsonb_array_length(NEW.dependent_on_jobs) > 0) EXECUTE FUNCTION jobdesk_jobs_after_insert_edges();
CREATE TRIGGER jobs_release_dependants AFTER DELETE ON jobs_live FOR EACH ROW
    WHEN (OLD.has_dependants) EXECUTE FUNCTION jobdesk_jobs_release_on_move();
CREATE TRIGGER jobs_release_dependants AFTER DELETE ON jobs_failed_cancelled FOR EACH ROW
    WHEN (OLD.has_dependants) EXECUTE FUNCTION jobdesk_jobs_release_on_move();
CREATE TRIGGER jobs_wake_parent AFTER DELETE ON jobs_live FOR EACH ROW
    WHEN (OLD.spawned_by IS NOT NULL) EXECUTE FUNCTION jobdesk_jobs_wake_parent_on_move();
DROP FUNCTION jobdesk_jobs_release_dependants();
DROP FUNCTION jobdesk_jobs_wake_parent();

-- Row triggers on `jobs` itself run in every partition, however a statement reaches it.
CREATE TRIGGER jobs_user_check BEFORE UPDATE OF user_id ON jobs FOR EACH ROW
    WHEN (NEW.user_id <> 1) EXECUTE FUNCTION jobdesk_check_job_user();
CREATE TRIGGER jobs_keep_id BEFORE UPDATE OF id ON jobs FOR EACH ROW
    WHEN (NEW.id::text IS DISTINCT FROM OLD.id::text) EXECUTE FUNCTION jobdesk_jobs_keep_id();
CREATE TRIGGER jobs_retain_from BEFORE UPDATE OF status ON jobs FOR EACH ROW
    WHEN (NEW.status = 'completed' AND OLD.status <> 'completed' AND NEW.retain_from = OLD.retain_from)
    EXECUTE FUNCTION jobdesk_jobs_retain_from();
CREATE TRIGGER jobs_moving_in BEFORE UPDATE OF status ON jobs FOR EACH ROW
    WHEN (OLD.status IN ('completed', 'failed', 'cancelled') AND NEW.status IN ('queued', 'in_progress', 'waiting_approval'))
    EXECUTE FUNCTION jobdesk_jobs_moving_in();
CREATE TRIGGER jobs_notify_requeue AFTER UPDATE OF status, pending_deps, is_active ON jobs FOR EACH ROW
    WHEN (NEW.status = 'queued' AND NEW.pending_deps = 0 AND NEW.is_active
          AND (OLD.status <> 'queued' OR OLD.pending_deps <> 0 OR NOT OLD.is_active))
    EXECUTE FUNCTION jobdesk_notify_new_jobs();
CREATE TRIGGER jobs_rescheduled AFTER UPDATE OF scheduled_at ON jobs FOR EACH ROW
    WHEN (NEW.status = 'queued' AND NEW.scheduled_at IS DISTINCT FROM OLD.scheduled_at)
    EXECUTE FUNCTION jobdesk_jobs_rescheduled();

-- Statement triggers fire for the table a statement names: `jobs` for plain SQL, and `jobs_live`
-- as well, which the engine names where every row it touches is live (enqueue, claim).
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['jobs', 'jobs_live'] LOOP
        EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %I REFERENCING NEW TABLE AS new_ids '
                       'FOR EACH STATEMENT EXECUTE FUNCTION jobdesk_jobs_check_ids()', t || '_check_ids', t);
        EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %I REFERENCING NEW TABLE AS changed_rows '
                       'FOR EACH STATEMENT EXECUTE FUNCTION jobdesk_notify_inserted_jobs()',
                       t || '_notify_changes_insert', t);
        EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %I REFERENCING NEW TABLE AS changed_rows '
                       'FOR EACH STATEMENT EXECUTE FUNCTION jobdesk_notify_job_changes()',
                       t || '_notify_changes_update', t);
        EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS changed_rows '
                       'FOR EACH STATEMENT EXECUTE FUNCTION jobdesk_notify_job_changes()',
                       t || '_notify_changes_delete', t);
        EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS gone_rows '
                       'FOR EACH STATEMENT EXECUTE FUNCTION jobdesk_jobs_forget_children()',
                       t || '_forget_children', t);
    END LOOP;
END $$;
CREATE TRIGGER jobs_truncate_children AFTER TRUNCATE ON jobs FOR EACH STATEMENT
    EXECUTE FUNCTION jobdesk_jobs_truncate_children();

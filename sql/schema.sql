-- jobdesk's database schema as the migrations leave it: tables, indexes, functions and triggers.
--
-- GENERATED: do not edit. `make schema` writes it (python -m jobdesk.store.schema_dump sql/schema.sql)
-- from a freshly migrated database, with pg_dump --schema-only --no-owner --no-privileges.
-- The numbered migrations in this folder remain the source of truth; change the schema with a new
-- migration, then run `make schema`. tests/store/test_schema_file.py fails while this file is out of date.

--
-- Name: jobdesk_apply_type_controls(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_apply_type_controls(job_type text) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    c     type_controls%ROWTYPE;
    f     flow_limits%ROWTYPE;
    fleet integer;
BEGIN
    SELECT * INTO c FROM type_controls WHERE type = job_type;
    SELECT COALESCE(c.max_running, l.env_max_running) INTO fleet FROM type_limits l WHERE l.type = job_type;
    IF NOT FOUND THEN
        fleet := c.max_running;
    END IF;
    IF fleet IS NULL THEN
        DELETE FROM type_limits WHERE type = job_type;
    ELSE
        INSERT INTO type_limits AS l (type, max_running) VALUES (job_type, fleet)
        ON CONFLICT (type) DO UPDATE SET max_running = EXCLUDED.max_running, updated_at = now()
         WHERE l.max_running <> EXCLUDED.max_running;
    END IF;
    SELECT * INTO f FROM flow_limits WHERE type = job_type FOR UPDATE;
    IF NOT FOUND THEN
        f.type := job_type;
        f.fair_share := false;
    END IF;
    IF c.rate_max IS NOT NULL THEN
        f.rate_max := c.rate_max; f.rate_period := c.rate_period;
    ELSE
        f.rate_max := f.env_rate_max; f.rate_period := f.env_rate_period;
    END IF;
    IF c.user_rate_max IS NOT NULL THEN
        f.user_rate_max := c.user_rate_max; f.user_rate_period := c.user_rate_period;
    ELSE
        f.user_rate_max := f.env_user_rate_max; f.user_rate_period := f.env_user_rate_period;
    END IF;
    f.user_max_running := COALESCE(c.user_max_running, f.env_user_max_running);
    IF f.rate_max IS NULL AND f.user_rate_max IS NULL AND f.user_max_running IS NULL AND NOT f.fair_share THEN
        DELETE FROM flow_limits WHERE type = job_type;
        RETURN;
    END IF;
    INSERT INTO flow_limits AS x (type, rate_max, rate_period, user_rate_max, user_rate_period, user_max_running)
    VALUES (job_type, f.rate_max, f.rate_period, f.user_rate_max, f.user_rate_period, f.user_max_running)
    ON CONFLICT (type) DO UPDATE
       SET rate_max = EXCLUDED.rate_max, rate_period = EXCLUDED.rate_period, user_rate_max = EXCLUDED.user_rate_max,
           user_rate_period = EXCLUDED.user_rate_period, user_max_running = EXCLUDED.user_max_running,
           updated_at = now()
     WHERE (x.rate_max, x.rate_period, x.user_rate_max, x.user_rate_period, x.user_max_running)
           IS DISTINCT FROM (EXCLUDED.rate_max, EXCLUDED.rate_period, EXCLUDED.user_rate_max,
                             EXCLUDED.user_rate_period, EXCLUDED.user_max_running);
END $$;


--
-- Name: jobdesk_check_job_user(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_check_job_user() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM 1 FROM users WHERE id = NEW.user_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'insert or update on table "jobs" violates the owner check: user % does not exist',
            NEW.user_id
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = format('Key (user_id)=(%s) is not present in table "users".', NEW.user_id),
                  TABLE = 'jobs', COLUMN = 'user_id';
    END IF;
    RETURN NEW;
END $$;


--
-- Name: jobdesk_completed_partitions(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_completed_partitions(OUT name text, OUT lower timestamp with time zone, OUT upper timestamp with time zone, OUT detaching boolean) RETURNS SETOF record
    LANGUAGE sql STABLE
    AS $$
    SELECT c.relname::text,
           nullif(substring(pg_get_expr(c.relpartbound, c.oid) FROM 'FROM \(''([^'']+)''\)'), '')::timestamptz,
           nullif(substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \(''([^'']+)''\)'), '')::timestamptz,
           i.inhdetachpending
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = 'jobs_completed'::regclass
     ORDER BY 2 NULLS FIRST
$$;


--
-- Name: jobdesk_event_lock(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_event_lock(key text) RETURNS void
    LANGUAGE sql
    AS $$
    SELECT pg_advisory_xact_lock(1785688677, abs(hashtext(key)) % 256)
$$;


--
-- Name: jobdesk_events_wake(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_events_wake() RETURNS trigger
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(1785688677, b)
       FROM (SELECT DISTINCT abs(hashtext(key)) % 256 AS b FROM new_events ORDER BY 1) locks;
    WITH woken AS (
        UPDATE jobs j SET run_at = NULL, updated_at = now()
          FROM job_waits w
         WHERE w.event_key = ANY (ARRAY(SELECT DISTINCT key FROM new_events))
           AND j.id = w.job_id AND j.attempts = w.attempt
           AND j.status = 'queued' AND j.run_at IS NOT NULL
        RETURNING w.job_id, w.step_name, w.event_key
    ), first AS (
        SELECT DISTINCT ON (e.key) e.key, e.payload FROM job_events e
         WHERE e.key = ANY (ARRAY(SELECT DISTINCT event_key FROM woken)) ORDER BY e.key, e.id
    )
    UPDATE job_steps s SET result = jsonb_build_object('key', w.event_key, 'payload', f.payload),
                           finished_at = now()
      FROM woken w JOIN first f ON f.key = w.event_key
     WHERE s.job_id = w.job_id AND s.name = w.step_name;
    IF FOUND THEN
        PERFORM pg_notify('jobdesk_new_jobs', '');
    END IF;
    RETURN NULL;
END $$;


--
-- Name: jobdesk_fair_turn(text, integer, integer, integer, character varying[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_fair_turn(job_type text, prio integer, after integer, want integer, skip character varying[], OUT ids character varying[], OUT users_seen integer, OUT last_user integer, OUT last_taken integer) RETURNS record
    LANGUAGE sql
    AS $$
    WITH RECURSIVE u(uid, n) AS (
        SELECT (SELECT COALESCE(user_id, 0) FROM jobs
                 WHERE type = job_type AND priority = prio AND COALESCE(user_id, 0) > after
                   AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL
                 ORDER BY COALESCE(user_id, 0) LIMIT 1), 1
        UNION ALL
        SELECT (SELECT COALESCE(user_id, 0) FROM jobs
                 WHERE type = job_type AND priority = prio AND COALESCE(user_id, 0) > u.uid
                   AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL
                 ORDER BY COALESCE(user_id, 0) LIMIT 1), u.n + 1
          FROM u WHERE u.uid IS NOT NULL AND u.n < want
    )
    SELECT COALESCE(array_agg(j.id ORDER BY u.n) FILTER (WHERE j.id IS NOT NULL), '{}'),
           count(u.uid)::integer, max(u.uid),
           (array_agg(u.uid ORDER BY u.n DESC) FILTER (WHERE j.id IS NOT NULL))[1]
      FROM u LEFT JOIN LATERAL (
            SELECT id FROM jobs
             WHERE type = job_type AND priority = prio AND COALESCE(user_id, 0) = u.uid
               AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL
               AND NOT id = ANY(skip)
             ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED) j ON true
     WHERE u.uid IS NOT NULL
$$;


--
-- Name: flow_limits; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.flow_limits (
    type character varying(255) NOT NULL,
    rate_max integer,
    rate_period interval,
    user_rate_max integer,
    user_rate_period interval,
    user_max_running integer,
    fair_share boolean DEFAULT false NOT NULL,
    starts timestamp with time zone[] DEFAULT '{}'::timestamp with time zone[] NOT NULL,
    fair_cursor integer,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    env_rate_max integer,
    env_rate_period interval,
    env_user_rate_max integer,
    env_user_rate_period interval,
    env_user_max_running integer,
    CONSTRAINT flow_limits_check CHECK (((rate_max IS NULL) = (rate_period IS NULL))),
    CONSTRAINT flow_limits_check1 CHECK (((user_rate_max IS NULL) = (user_rate_period IS NULL))),
    CONSTRAINT flow_limits_rate_max_check CHECK ((rate_max >= 1)),
    CONSTRAINT flow_limits_rate_period_check CHECK ((rate_period > '00:00:00'::interval)),
    CONSTRAINT flow_limits_user_max_running_check CHECK ((user_max_running >= 0)),
    CONSTRAINT flow_limits_user_rate_max_check CHECK ((user_rate_max >= 1)),
    CONSTRAINT flow_limits_user_rate_period_check CHECK ((user_rate_period > '00:00:00'::interval))
);


--
-- Name: jobdesk_flow_by_user(public.flow_limits, integer, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_flow_by_user(f public.flow_limits, room integer, running jsonb) RETURNS character varying[]
    LANGUAGE plpgsql
    AS $$
DECLARE
    ids   varchar[] := '{}';
    prio  integer;
    users integer[];
    rooms integer[];
BEGIN
    LOOP
        EXIT WHEN cardinality(ids) >= room;
        prio := jobdesk_ready_priority(f.type, prio);
        EXIT WHEN prio IS NULL;
        SELECT COALESCE(array_agg(u), '{}'), COALESCE(array_agg(r), '{}') INTO users, rooms
          FROM (SELECT u, jobdesk_user_room(f, u, running, 0) AS r
                  FROM unnest(jobdesk_ready_users(f.type, prio)) u) x WHERE r > 0;
        ids := ids || ARRAY(
            SELECT c.id FROM unnest(users, rooms) AS x(u, r)
             CROSS JOIN LATERAL (
                SELECT id, seq FROM jobs
                 WHERE type = f.type AND priority = prio AND COALESCE(user_id, 0) = x.u
                   AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL
                 ORDER BY seq LIMIT x.r FOR UPDATE SKIP LOCKED) c
             ORDER BY c.seq LIMIT room - cardinality(ids));
    END LOOP;
    RETURN ids;
END $$;


--
-- Name: jobdesk_flow_fair(public.flow_limits, integer, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_flow_fair(f public.flow_limits, room integer, running jsonb) RETURNS character varying[]
    LANGUAGE plpgsql
    AS $$
DECLARE
    ids       varchar[] := '{}';
    taken     jsonb := '{}';  -- user -> the seq of the last job taken from them
    counts    jsonb := '{}';  -- user -> how many taken
    per_user  boolean := f.user_max_running IS NOT NULL OR f.user_rate_max IS NOT NULL;
    prio      integer;
    uid       integer;
    nxt       integer;
    took      boolean;        -- whether this pass over the users took a job
    passes    integer;
    jid       varchar;
    jseq      bigint;
    cursor_u  integer := f.fair_cursor;
BEGIN
    LOOP
        EXIT WHEN cardinality(ids) >= room;
        prio := jobdesk_ready_priority(f.type, prio);
        EXIT WHEN prio IS NULL;
        uid := COALESCE(cursor_u, -2147483648);
        took := false;
        passes := 0;
        WHILE cardinality(ids) < room LOOP
            SELECT COALESCE(user_id, 0) INTO nxt FROM jobs
             WHERE type = f.type AND priority = prio AND COALESCE(user_id, 0) > uid
               AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL
             ORDER BY COALESCE(user_id, 0) LIMIT 1;
            IF nxt IS NULL THEN  -- past the last user: the next pass starts from the first
                EXIT WHEN passes > 0 AND NOT took;
                passes := passes + 1;
                took := false;
                uid := -2147483648;
                CONTINUE;
            END IF;
            uid := nxt;
            jid := NULL;
            IF NOT per_user OR jobdesk_user_room(f, uid, running, COALESCE((counts ->> uid::text)::integer, 0)) > 0 THEN
                SELECT id, seq INTO jid, jseq FROM jobs
                 WHERE type = f.type AND priority = prio AND COALESCE(user_id, 0) = uid
                   AND seq > COALESCE((taken ->> uid::text)::bigint, 0)
                   AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL
                 ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED;
            END IF;
            CONTINUE WHEN jid IS NULL;
            took := true;
            ids := ids || jid;
            cursor_u := uid;
            taken := taken || jsonb_build_object(uid::text, jseq);
            IF per_user THEN
                counts := counts || jsonb_build_object(uid::text, COALESCE((counts ->> uid::text)::integer, 0) + 1);
            END IF;
        END LOOP;
    END LOOP;
    IF cursor_u IS DISTINCT FROM f.fair_cursor THEN
        UPDATE flow_limits SET fair_cursor = cursor_u WHERE type = f.type;
    END IF;
    RETURN ids;
END $$;


--
-- Name: jobdesk_flow_pick(character varying, text, integer, integer, text[], integer[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_flow_pick(worker character varying, job_type text, want integer, own_cap integer, done_ids text[] DEFAULT '{}'::text[], done_attempts integer[] DEFAULT '{}'::integer[], OUT ids character varying[], OUT next_at timestamp with time zone) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    f       flow_limits%ROWTYPE;
    fleet   integer;
    room    integer;
    rate    integer;
    running jsonb := '{}';
BEGIN
    ids := '{}';
    SELECT * INTO f FROM flow_limits WHERE type = job_type FOR UPDATE;
    IF NOT FOUND OR want <= 0 THEN
        RETURN;
    END IF;
    SELECT max_running INTO fleet FROM type_limits WHERE type = job_type FOR UPDATE;
    room := want;
    IF fleet IS NOT NULL OR own_cap IS NOT NULL THEN
        room := jobdesk_type_room(worker, job_type, fleet, own_cap, want, done_ids, done_attempts);
    END IF;
    IF f.rate_max IS NOT NULL THEN
        rate := jobdesk_rate_room(f.starts, f.rate_max, f.rate_period);
        IF rate <= 0 THEN
            next_at := jobdesk_rate_next(f.starts, f.rate_max, f.rate_period, want);
            RETURN;
        END IF;
        room := LEAST(room, rate);
    END IF;
    IF room <= 0 THEN
        next_at := 'infinity';  -- held by the type's concurrency limit or the worker's cap
        RETURN;
    END IF;
    IF f.user_max_running IS NOT NULL THEN
        running := jobdesk_user_running(job_type, done_ids, done_attempts);
    END IF;
    IF f.fair_share AND f.user_max_running IS NULL AND f.user_rate_max IS NULL THEN
        ids := jobdesk_flow_round_robin(f, room);
    ELSIF f.fair_share THEN
        ids := jobdesk_flow_fair(f, room, running);
    ELSIF f.user_max_running IS NOT NULL OR f.user_rate_max IS NOT NULL THEN
        ids := jobdesk_flow_by_user(f, room, running);
    ELSE
        ids := ARRAY(SELECT id FROM jobs
                      WHERE type = job_type
                        AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL
                      ORDER BY priority DESC, seq LIMIT room FOR UPDATE SKIP LOCKED);
    END IF;
    IF cardinality(ids) = 0 THEN
        IF jobdesk_ready_priority(job_type, NULL) IS NOT NULL THEN
            next_at := 'infinity';  -- runnable jobs, all held by their users' limits
        END IF;
        RETURN;
    END IF;
    IF f.rate_max IS NOT NULL THEN
        f.starts := jobdesk_rate_log(f.starts, cardinality(ids), f.rate_max);
        UPDATE flow_limits SET starts = f.starts WHERE type = job_type;
        IF cardinality(ids) >= rate THEN
            next_at := jobdesk_rate_next(f.starts, f.rate_max, f.rate_period, want);
        END IF;
    END IF;
    IF f.user_rate_max IS NOT NULL THEN
        INSERT INTO flow_user_starts AS s (type, user_id, starts)
        SELECT job_type, c.u, jobdesk_rate_log('{}', c.n, f.user_rate_max)
          FROM (SELECT COALESCE(user_id, 0) AS u, count(*)::integer AS n FROM jobs
                 WHERE id = ANY(ids) GROUP BY 1) c
        ON CONFLICT (type, user_id) DO UPDATE
           SET starts = jobdesk_rate_log(s.starts, cardinality(EXCLUDED.starts), f.user_rate_max);
    END IF;
END $$;


--
-- Name: jobdesk_flow_round_robin(public.flow_limits, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_flow_round_robin(f public.flow_limits, room integer) RETURNS character varying[]
    LANGUAGE plpgsql
    AS $$
DECLARE
    ids      varchar[] := '{}';
    prio     integer;
    after    integer;
    took     boolean;   -- whether this round took a job
    wrapped  boolean;
    t        record;
    cursor_u integer := f.fair_cursor;
BEGIN
    LOOP
        EXIT WHEN cardinality(ids) >= room;
        prio := jobdesk_ready_priority(f.type, prio);
        EXIT WHEN prio IS NULL;
        after := COALESCE(cursor_u, -2147483648);
        took := false;
        wrapped := false;
        WHILE cardinality(ids) < room LOOP
            SELECT * INTO t FROM jobdesk_fair_turn(f.type, prio, after, room - cardinality(ids), ids);
            IF cardinality(t.ids) > 0 THEN
                ids := ids || t.ids;
                cursor_u := t.last_taken;
                took := true;
            END IF;
            IF t.users_seen < room - cardinality(ids) + cardinality(t.ids) THEN  -- past the last user
                EXIT WHEN wrapped AND NOT took;
                wrapped := true;
                took := false;
                after := -2147483648;
            ELSE
                after := t.last_user;
            END IF;
        END LOOP;
    END LOOP;
    IF cursor_u IS DISTINCT FROM f.fair_cursor THEN
        UPDATE flow_limits SET fair_cursor = cursor_u WHERE type = f.type;
    END IF;
    RETURN ids;
END $$;


--
-- Name: jobdesk_id_born(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_id_born(id text) RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE WHEN id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-7'
                THEN to_timestamp(('x' || lpad(left(replace(id, '-', ''), 12), 16, '0'))::bit(64)::bigint / 1000.0)
                     - interval '1 day'
                ELSE '-infinity' END
$$;


--
-- Name: jobdesk_jobs_after_insert_edges(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_jobs_after_insert_edges() RETURNS trigger
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    SET plan_cache_mode TO 'auto'
    AS $$
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


--
-- Name: jobdesk_jobs_before_insert(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_jobs_before_insert() RETURNS trigger
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    SET plan_cache_mode TO 'auto'
    AS $$
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


--
-- Name: jobdesk_jobs_check_ids(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_jobs_check_ids() RETURNS trigger
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'auto'
    AS $$
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


--
-- Name: jobdesk_jobs_forget_children(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_jobs_forget_children() RETURNS trigger
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    AS $$
DECLARE
    ids varchar[];
BEGIN
    SELECT array_agg(id) INTO ids FROM gone_rows;
    IF ids IS NULL THEN
        RETURN NULL;
    END IF;
    DELETE FROM job_attempts       WHERE job_id = ANY (ids);
    DELETE FROM job_steps          WHERE job_id = ANY (ids);
    DELETE FROM job_waits          WHERE job_id = ANY (ids);
    DELETE FROM job_dependencies   WHERE job_id = ANY (ids);
    DELETE FROM job_dependencies   WHERE depends_on_id = ANY (ids);
    DELETE FROM job_progress       WHERE job_id = ANY (ids);
    DELETE FROM job_logs           WHERE job_id = ANY (ids);
    DELETE FROM job_stacks         WHERE job_id = ANY (ids);
    DELETE FROM job_stack_requests WHERE job_id = ANY (ids);
    RETURN NULL;
END $$;


--
-- Name: jobdesk_jobs_keep_id(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_jobs_keep_id() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'a job''s id cannot change (job %)', OLD.id USING ERRCODE = 'restrict_violation';
END $$;


--
-- Name: jobdesk_jobs_moving_in(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_jobs_moving_in() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM set_config('jobdesk.moving_in', NEW.id, true);
    IF NEW.status = 'queued' AND NEW.pending_deps = 0 AND NEW.is_active THEN
        PERFORM pg_notify('jobdesk_new_jobs', '');  -- sent at the commit, as the move is then
    END IF;
    RETURN NEW;
END $$;


--
-- Name: jobdesk_jobs_release_on_move(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_jobs_release_on_move() RETURNS trigger
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    SET plan_cache_mode TO 'auto'
    AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM jobs_completed WHERE id = OLD.id) THEN
        UPDATE jobs SET pending_deps = pending_deps - 1
         WHERE id = ANY (ARRAY(SELECT job_id FROM job_dependencies WHERE depends_on_id = OLD.id));
    END IF;
    RETURN NULL;
END $$;


--
-- Name: jobdesk_jobs_rescheduled(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_jobs_rescheduled() RETURNS trigger
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    SET plan_cache_mode TO 'auto'
    AS $$
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


--
-- Name: jobdesk_jobs_retain_from(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_jobs_retain_from() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    NEW.retain_from := now();
    RETURN NEW;
END $$;


--
-- Name: jobdesk_jobs_truncate_children(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_jobs_truncate_children() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    TRUNCATE job_attempts, job_dependencies, job_steps, job_waits, job_progress, job_logs,
             job_stacks, job_stack_requests;
    RETURN NULL;
END $$;


--
-- Name: jobdesk_jobs_wake_parent_on_move(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_jobs_wake_parent_on_move() RETURNS trigger
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    SET plan_cache_mode TO 'auto'
    AS $$
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


--
-- Name: jobdesk_keep_job_owners(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_keep_job_owners() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.id = OLD.id THEN
        RETURN NEW;
    END IF;
    IF OLD.id = 1 THEN
        RAISE EXCEPTION 'the default user (id 1) owns every job enqueued without a user; it cannot be %',
            CASE TG_OP WHEN 'DELETE' THEN 'deleted' ELSE 'renumbered' END
            USING ERRCODE = 'foreign_key_violation', TABLE = 'users';
    END IF;
    IF EXISTS (SELECT 1 FROM jobs WHERE user_id = OLD.id) THEN
        RAISE EXCEPTION 'user % owns jobs; it cannot be %', OLD.id,
            CASE TG_OP WHEN 'DELETE' THEN 'deleted' ELSE 'renumbered' END
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = format('Key (id)=(%s) is still referenced from table "jobs".', OLD.id),
                  TABLE = 'users';
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END $$;


--
-- Name: jobdesk_make_completed_partition(timestamp with time zone, timestamp with time zone, regclass); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_make_completed_partition(lower timestamp with time zone, upper timestamp with time zone, strays regclass DEFAULT NULL::regclass) RETURNS text
    LANGUAGE plpgsql
    AS $_$
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
END $_$;


--
-- Name: jobdesk_make_partitions_ahead(double precision, timestamp with time zone, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_make_partitions_ahead(width_s double precision, until timestamp with time zone, lock_timeout_ms integer DEFAULT 200) RETURNS text[]
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: jobdesk_notify_inserted_jobs(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_notify_inserted_jobs() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: jobdesk_notify_job_changes(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_notify_job_changes() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: jobdesk_notify_new_jobs(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_notify_new_jobs() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('jobdesk_new_jobs', '');
    RETURN NULL;
END $$;


--
-- Name: jobdesk_rate_log(timestamp with time zone[], integer, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_rate_log(starts timestamp with time zone[], n integer, max_n integer) RETURNS timestamp with time zone[]
    LANGUAGE sql STABLE
    AS $$
    SELECT COALESCE(array_agg(s ORDER BY s), '{}') FROM (
        SELECT s FROM (SELECT unnest(starts) UNION ALL SELECT now() FROM generate_series(1, n)) AS x(s)
         ORDER BY s DESC LIMIT max_n) y
$$;


--
-- Name: jobdesk_rate_next(timestamp with time zone[], integer, interval, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_rate_next(starts timestamp with time zone[], max_n integer, period interval, k integer DEFAULT 1) RETURNS timestamp with time zone
    LANGUAGE sql STABLE
    AS $$
    SELECT s + period FROM unnest(starts) s WHERE s > now() - period
     ORDER BY s DESC OFFSET max_n - LEAST(k, max_n) LIMIT 1
$$;


--
-- Name: jobdesk_rate_room(timestamp with time zone[], integer, interval); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_rate_room(starts timestamp with time zone[], max_n integer, period interval) RETURNS integer
    LANGUAGE sql STABLE
    AS $$
    SELECT max_n - count(*)::integer FROM unnest(starts) s WHERE s > now() - period
$$;


--
-- Name: jobdesk_ready_priority(text, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_ready_priority(job_type text, above integer) RETURNS integer
    LANGUAGE sql STABLE
    AS $$
    SELECT priority FROM jobs
     WHERE type = job_type AND (above IS NULL OR priority < above)
       AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL
     ORDER BY priority DESC, seq LIMIT 1
$$;


--
-- Name: jobdesk_ready_users(text, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_ready_users(job_type text, prio integer) RETURNS integer[]
    LANGUAGE sql STABLE
    AS $$
    WITH RECURSIVE u(uid) AS (
        (SELECT COALESCE(user_id, 0) FROM jobs
          WHERE type = job_type AND priority = prio
            AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL
          ORDER BY COALESCE(user_id, 0) LIMIT 1)
        UNION ALL
        SELECT (SELECT COALESCE(user_id, 0) FROM jobs
                 WHERE type = job_type AND priority = prio AND COALESCE(user_id, 0) > u.uid
                   AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL
                 ORDER BY COALESCE(user_id, 0) LIMIT 1)
          FROM u WHERE u.uid IS NOT NULL
    )
    SELECT COALESCE(array_agg(uid), '{}') FROM u WHERE uid IS NOT NULL
$$;


--
-- Name: jobdesk_stats_bin(double precision); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_stats_bin(secs double precision) RETURNS smallint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE WHEN secs IS NULL OR secs < 0.001 THEN 0
                ELSE least(55, 1 + floor(2 * ln(secs * 1000) / ln(2)))::smallint END
$$;


--
-- Name: jobdesk_suspend(character varying, character varying, integer, text, timestamp with time zone, text, text[], text, jsonb, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_suspend(p_job character varying, p_worker character varying, p_attempt integer, p_kind text, p_until timestamp with time zone, p_event_key text, p_child_ids text[], p_step_name text, p_step_result jsonb, p_step_started timestamp with time zone) RETURNS text
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    SET plan_cache_mode TO 'auto'
    AS $$
DECLARE
    ready   boolean := false;
    started timestamptz;
    jtype   varchar;
BEGIN
    IF p_event_key IS NOT NULL THEN
        PERFORM jobdesk_event_lock(p_event_key);
    END IF;
    SELECT j.started_at, j.type INTO started, jtype FROM jobs j
     WHERE j.id = p_job AND j.worker_id = p_worker AND j.attempts = p_attempt
       AND j.status = 'in_progress' AND j.is_active
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF p_step_name IS NOT NULL THEN
        INSERT INTO job_steps (job_id, name, result, attempt, started_at)
        VALUES (p_job, p_step_name, p_step_result, p_attempt, p_step_started)
        ON CONFLICT (job_id, name) DO NOTHING;
    END IF;
    IF p_kind = 'event' THEN
        -- Emitted meanwhile: its payload completes the checkpoint, as a wake does.
        UPDATE job_steps s SET result = jsonb_build_object('key', p_event_key, 'payload', e.payload),
                               finished_at = now()
          FROM (SELECT payload FROM job_events WHERE key = p_event_key ORDER BY id LIMIT 1) e
         WHERE s.job_id = p_job AND s.name = p_step_name;
        ready := FOUND;
    ELSIF p_kind = 'jobs' THEN
        ready := NOT EXISTS (SELECT 1 FROM jobs c WHERE c.id = ANY (p_child_ids)
                               AND c.status NOT IN ('completed', 'failed', 'cancelled'));
    END IF;
    ready := ready OR p_until <= now();
    INSERT INTO job_waits (job_id, attempt, kind, event_key, child_ids, until, step_name)
    VALUES (p_job, p_attempt, p_kind, p_event_key, p_child_ids, p_until, p_step_name)
    ON CONFLICT (job_id) DO UPDATE
       SET attempt = EXCLUDED.attempt, kind = EXCLUDED.kind, event_key = EXCLUDED.event_key,
           child_ids = EXCLUDED.child_ids, until = EXCLUDED.until, step_name = EXCLUDED.step_name,
           created_at = now();
    UPDATE jobs SET status = 'queued', worker_id = NULL, updated_at = now(),
                    run_at = CASE WHEN ready THEN NULL ELSE p_until END
     WHERE id = p_job;
    INSERT INTO job_attempts (job_id, attempt, worker_id, started_at, outcome, error_message, job_type)
    VALUES (p_job, p_attempt, p_worker, started, 'suspended',
            CASE p_kind WHEN 'sleep' THEN 'sleeping' WHEN 'event' THEN 'waiting for event ' || p_event_key
                        ELSE 'waiting for child jobs' END, jtype);
    RETURN CASE WHEN ready THEN 'ready' ELSE 'suspended' END;
END $$;


--
-- Name: jobdesk_type_room(character varying, text, integer, integer, integer, text[], integer[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_type_room(worker character varying, job_type text, fleet_max integer, own_cap integer, want integer, done_ids text[] DEFAULT '{}'::text[], done_attempts integer[] DEFAULT '{}'::integer[]) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    total integer;
    mine  integer;
BEGIN
    IF own_cap IS NOT NULL THEN  -- the worker's own claims of the type, one at a time
        PERFORM pg_advisory_xact_lock(hashtext('jobdesk.type_cap.' || worker || '.' || job_type));
    END IF;
    SELECT count(*), count(*) FILTER (WHERE worker_id = worker) INTO total, mine
      FROM jobs j WHERE status = 'in_progress' AND type = job_type
       AND NOT (j.worker_id = worker AND j.is_active
                AND (j.id, j.attempts) IN (SELECT * FROM unnest(done_ids, done_attempts)));
    RETURN GREATEST(0, LEAST(want, fleet_max - total, own_cap - mine));
END $$;


--
-- Name: jobdesk_user_room(public.flow_limits, integer, jsonb, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_user_room(f public.flow_limits, uid integer, running jsonb, taken integer) RETURNS integer
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    room integer := 2147483647;
    log  timestamptz[];
BEGIN
    IF f.user_max_running IS NOT NULL THEN
        room := f.user_max_running - COALESCE((running ->> uid::text)::integer, 0);
    END IF;
    IF f.user_rate_max IS NOT NULL THEN
        SELECT starts INTO log FROM flow_user_starts WHERE type = f.type AND user_id = uid;
        room := LEAST(room, jobdesk_rate_room(COALESCE(log, '{}'), f.user_rate_max, f.user_rate_period));
    END IF;
    RETURN room - taken;
END $$;


--
-- Name: jobdesk_user_running(text, text[], integer[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_user_running(job_type text, done_ids text[], done_attempts integer[]) RETURNS jsonb
    LANGUAGE sql
    AS $$
    SELECT COALESCE(jsonb_object_agg(u, n), '{}') FROM (
        SELECT COALESCE(user_id, 0) AS u, count(*) AS n FROM jobs j
         WHERE status = 'in_progress' AND type = job_type
           AND (j.id, j.attempts) NOT IN (SELECT * FROM unnest(done_ids, done_attempts))
         GROUP BY 1) c
$$;


--
-- Name: jobdesk_uuid7(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jobdesk_uuid7() RETURNS text
    LANGUAGE sql
    AS $$
    SELECT overlay(lpad(to_hex(floor(date_part('epoch', clock_timestamp()) * 1000)::bigint), 12, '0')
                   PLACING '-' FROM 9 FOR 0)
        || '-7' || lpad(to_hex(floor(random() * 4096)::int # (pg_backend_pid() & 4095)), 3, '0')
        || '-' || to_hex(8 + floor(random() * 4)::int) || lpad(to_hex(floor(random() * 4096)::int), 3, '0')
        || '-' || lpad(to_hex(floor(random() * 281474976710656)::bigint), 12, '0')
$$;


--
-- Name: api_idempotency_keys; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.api_idempotency_keys (
    owner text NOT NULL,
    key text NOT NULL,
    fingerprint text NOT NULL,
    status_code integer DEFAULT 201 NOT NULL,
    response jsonb,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: api_tokens; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.api_tokens (
    id bigint NOT NULL,
    name text NOT NULL,
    token_hash text NOT NULL,
    user_id integer,
    scopes text[] DEFAULT '{read,submit,operate,approve}'::text[] NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone
);


--
-- Name: api_tokens_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.api_tokens ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.api_tokens_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: audit_log; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.audit_log (
    id bigint NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    os_user text,
    db_user text DEFAULT CURRENT_USER NOT NULL,
    source text,
    action text NOT NULL,
    job_ids text[] NOT NULL,
    reason text,
    actor text,
    job_type text
);


--
-- Name: audit_log_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.audit_log ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.audit_log_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: flow_user_starts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.flow_user_starts (
    type character varying(255) NOT NULL,
    user_id integer NOT NULL,
    starts timestamp with time zone[] NOT NULL
);


--
-- Name: job_attempts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.job_attempts (
    id bigint NOT NULL,
    job_id character varying(36) NOT NULL,
    attempt integer NOT NULL,
    worker_id character varying(64),
    started_at timestamp with time zone,
    finished_at timestamp with time zone DEFAULT now() NOT NULL,
    outcome character varying(32) NOT NULL,
    error_message text,
    traceback text,
    error_fingerprint text,
    job_type character varying(255)
);


--
-- Name: job_attempts_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.job_attempts ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.job_attempts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: job_dependencies; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.job_dependencies (
    job_id character varying(36) NOT NULL,
    depends_on_id character varying(36) NOT NULL
);


--
-- Name: job_events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.job_events (
    id bigint NOT NULL,
    key text NOT NULL,
    payload jsonb,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT job_events_key_check CHECK ((key <> ''::text))
);


--
-- Name: job_events_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.job_events ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.job_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: job_logs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.job_logs (
    job_id character varying(36) NOT NULL,
    attempt integer NOT NULL,
    seq integer NOT NULL,
    at timestamp with time zone NOT NULL,
    level character varying(16) NOT NULL,
    logger text NOT NULL,
    message text NOT NULL,
    trace_id text,
    span_id text
);


--
-- Name: job_progress; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.job_progress (
    job_id character varying(36) NOT NULL,
    fraction double precision NOT NULL,
    message text,
    at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT job_progress_fraction_check CHECK (((fraction >= (0)::double precision) AND (fraction <= (1)::double precision)))
);


--
-- Name: job_queue_depth; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.job_queue_depth (
    bucket timestamp with time zone NOT NULL,
    status character varying(32) NOT NULL,
    n bigint NOT NULL
);


--
-- Name: job_stack_requests; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.job_stack_requests (
    id bigint NOT NULL,
    job_id character varying(36) NOT NULL,
    worker_id character varying(64) NOT NULL,
    asked_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: job_stack_requests_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.job_stack_requests_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: job_stack_requests_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.job_stack_requests_id_seq OWNED BY public.job_stack_requests.id;


--
-- Name: job_stacks; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.job_stacks (
    job_id character varying(36) NOT NULL,
    attempt integer NOT NULL,
    worker_id character varying(64) NOT NULL,
    taken_at timestamp with time zone NOT NULL,
    frames jsonb NOT NULL
);


--
-- Name: job_stats; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.job_stats (
    grain character(1) NOT NULL,
    bucket timestamp with time zone NOT NULL,
    type character varying(255) NOT NULL,
    completed integer DEFAULT 0 NOT NULL,
    failed integer DEFAULT 0 NOT NULL,
    d_queued integer DEFAULT 0 NOT NULL,
    d_in_progress integer DEFAULT 0 NOT NULL,
    d_waiting integer DEFAULT 0 NOT NULL
);


--
-- Name: job_stats_5s; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.job_stats_5s (
    bucket timestamp with time zone NOT NULL,
    type character varying(255) NOT NULL,
    finished integer DEFAULT 0 NOT NULL,
    failed integer DEFAULT 0 NOT NULL
);


--
-- Name: job_stats_hist; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.job_stats_hist (
    grain character(1) NOT NULL,
    bucket timestamp with time zone NOT NULL,
    type character varying(255) NOT NULL,
    metric character varying(8) NOT NULL,
    bin smallint NOT NULL,
    n integer DEFAULT 0 NOT NULL
);


--
-- Name: job_steps; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.job_steps (
    job_id character varying(36) NOT NULL,
    name text NOT NULL,
    result jsonb,
    attempt integer NOT NULL,
    started_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: job_waits; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.job_waits (
    job_id character varying(36) NOT NULL,
    attempt integer NOT NULL,
    kind text NOT NULL,
    event_key text,
    child_ids text[],
    until timestamp with time zone NOT NULL,
    step_name text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT job_waits_kind_check CHECK ((kind = ANY (ARRAY['sleep'::text, 'event'::text, 'jobs'::text])))
);


--
-- Name: jobdesk_leases; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.jobdesk_leases (
    name text NOT NULL,
    holder text,
    expires_at timestamp with time zone DEFAULT now() NOT NULL,
    last_run_at timestamp with time zone,
    last_result jsonb
);


--
-- Name: jobdesk_migrations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.jobdesk_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: jobs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.jobs (
    id character varying(36) DEFAULT public.jobdesk_uuid7() NOT NULL,
    type character varying(255) NOT NULL,
    status character varying(32) DEFAULT 'queued'::character varying NOT NULL,
    user_id integer DEFAULT 1,
    pipeline_id character varying(36),
    input_data jsonb NOT NULL,
    result_data jsonb,
    error_message text,
    dependent_on_jobs jsonb DEFAULT '[]'::jsonb,
    retry_count integer DEFAULT 0 NOT NULL,
    next_retry_at timestamp with time zone,
    is_active boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    completed_at timestamp with time zone,
    seq bigint NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    pending_deps integer DEFAULT 0 NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    worker_id character varying(64),
    started_at timestamp with time zone,
    pending_next_jobs jsonb,
    has_dependants boolean DEFAULT false NOT NULL,
    run_at timestamp with time zone,
    error_fingerprint text,
    scheduled_at timestamp with time zone,
    unique_key character varying(255) DEFAULT NULL::character varying,
    spawned_by character varying(36),
    trace_context jsonb,
    retain_from timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT jobs_deps_is_array CHECK ((jsonb_typeof(dependent_on_jobs) = 'array'::text)),
    CONSTRAINT jobs_input_is_object CHECK ((jsonb_typeof(input_data) = 'object'::text)),
    CONSTRAINT jobs_status_check CHECK (((status)::text = ANY ('{queued,in_progress,completed,failed,cancelled,waiting_approval}'::text[])))
)
PARTITION BY LIST (status);


--
-- Name: jobs_completed; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.jobs_completed (
    id character varying(36) DEFAULT public.jobdesk_uuid7() CONSTRAINT jobs_id_not_null NOT NULL,
    type character varying(255) CONSTRAINT jobs_type_not_null NOT NULL,
    status character varying(32) DEFAULT 'queued'::character varying CONSTRAINT jobs_status_not_null NOT NULL,
    user_id integer DEFAULT 1,
    pipeline_id character varying(36),
    input_data jsonb CONSTRAINT jobs_input_data_not_null NOT NULL,
    result_data jsonb,
    error_message text,
    dependent_on_jobs jsonb DEFAULT '[]'::jsonb,
    retry_count integer DEFAULT 0 CONSTRAINT jobs_retry_count_not_null NOT NULL,
    next_retry_at timestamp with time zone,
    is_active boolean DEFAULT true CONSTRAINT jobs_is_active_not_null NOT NULL,
    created_at timestamp with time zone DEFAULT now() CONSTRAINT jobs_created_at_not_null NOT NULL,
    updated_at timestamp with time zone DEFAULT now() CONSTRAINT jobs_updated_at_not_null NOT NULL,
    completed_at timestamp with time zone,
    seq bigint CONSTRAINT jobs_seq_not_null NOT NULL,
    priority integer DEFAULT 0 CONSTRAINT jobs_priority_not_null NOT NULL,
    pending_deps integer DEFAULT 0 CONSTRAINT jobs_pending_deps_not_null NOT NULL,
    attempts integer DEFAULT 0 CONSTRAINT jobs_attempts_not_null NOT NULL,
    worker_id character varying(64),
    started_at timestamp with time zone,
    pending_next_jobs jsonb,
    has_dependants boolean DEFAULT false CONSTRAINT jobs_has_dependants_not_null NOT NULL,
    run_at timestamp with time zone,
    error_fingerprint text,
    scheduled_at timestamp with time zone,
    unique_key character varying(255) DEFAULT NULL::character varying,
    spawned_by character varying(36),
    trace_context jsonb,
    retain_from timestamp with time zone DEFAULT now() CONSTRAINT jobs_retain_from_not_null NOT NULL,
    CONSTRAINT jobs_deps_is_array CHECK ((jsonb_typeof(dependent_on_jobs) = 'array'::text)),
    CONSTRAINT jobs_input_is_object CHECK ((jsonb_typeof(input_data) = 'object'::text)),
    CONSTRAINT jobs_status_check CHECK (((status)::text = ANY ('{queued,in_progress,completed,failed,cancelled,waiting_approval}'::text[])))
)
PARTITION BY RANGE (retain_from);


--
-- Name: jobs_completed_later; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.jobs_completed_later (
    id character varying(36) DEFAULT public.jobdesk_uuid7() CONSTRAINT jobs_id_not_null NOT NULL,
    type character varying(255) CONSTRAINT jobs_type_not_null NOT NULL,
    status character varying(32) DEFAULT 'queued'::character varying CONSTRAINT jobs_status_not_null NOT NULL,
    user_id integer DEFAULT 1,
    pipeline_id character varying(36),
    input_data jsonb CONSTRAINT jobs_input_data_not_null NOT NULL,
    result_data jsonb,
    error_message text,
    dependent_on_jobs jsonb DEFAULT '[]'::jsonb,
    retry_count integer DEFAULT 0 CONSTRAINT jobs_retry_count_not_null NOT NULL,
    next_retry_at timestamp with time zone,
    is_active boolean DEFAULT true CONSTRAINT jobs_is_active_not_null NOT NULL,
    created_at timestamp with time zone DEFAULT now() CONSTRAINT jobs_created_at_not_null NOT NULL,
    updated_at timestamp with time zone DEFAULT now() CONSTRAINT jobs_updated_at_not_null NOT NULL,
    completed_at timestamp with time zone,
    seq bigint CONSTRAINT jobs_seq_not_null NOT NULL,
    priority integer DEFAULT 0 CONSTRAINT jobs_priority_not_null NOT NULL,
    pending_deps integer DEFAULT 0 CONSTRAINT jobs_pending_deps_not_null NOT NULL,
    attempts integer DEFAULT 0 CONSTRAINT jobs_attempts_not_null NOT NULL,
    worker_id character varying(64),
    started_at timestamp with time zone,
    pending_next_jobs jsonb,
    has_dependants boolean DEFAULT false CONSTRAINT jobs_has_dependants_not_null NOT NULL,
    run_at timestamp with time zone,
    error_fingerprint text,
    scheduled_at timestamp with time zone,
    unique_key character varying(255) DEFAULT NULL::character varying,
    spawned_by character varying(36),
    trace_context jsonb,
    retain_from timestamp with time zone DEFAULT now() CONSTRAINT jobs_retain_from_not_null NOT NULL,
    CONSTRAINT jobs_deps_is_array CHECK ((jsonb_typeof(dependent_on_jobs) = 'array'::text)),
    CONSTRAINT jobs_input_is_object CHECK ((jsonb_typeof(input_data) = 'object'::text)),
    CONSTRAINT jobs_status_check CHECK (((status)::text = ANY ('{queued,in_progress,completed,failed,cancelled,waiting_approval}'::text[])))
);


--
-- Name: jobs_completed_start; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.jobs_completed_start (
    id character varying(36) DEFAULT public.jobdesk_uuid7() CONSTRAINT jobs_id_not_null NOT NULL,
    type character varying(255) CONSTRAINT jobs_type_not_null NOT NULL,
    status character varying(32) DEFAULT 'queued'::character varying CONSTRAINT jobs_status_not_null NOT NULL,
    user_id integer DEFAULT 1,
    pipeline_id character varying(36),
    input_data jsonb CONSTRAINT jobs_input_data_not_null NOT NULL,
    result_data jsonb,
    error_message text,
    dependent_on_jobs jsonb DEFAULT '[]'::jsonb,
    retry_count integer DEFAULT 0 CONSTRAINT jobs_retry_count_not_null NOT NULL,
    next_retry_at timestamp with time zone,
    is_active boolean DEFAULT true CONSTRAINT jobs_is_active_not_null NOT NULL,
    created_at timestamp with time zone DEFAULT now() CONSTRAINT jobs_created_at_not_null NOT NULL,
    updated_at timestamp with time zone DEFAULT now() CONSTRAINT jobs_updated_at_not_null NOT NULL,
    completed_at timestamp with time zone,
    seq bigint CONSTRAINT jobs_seq_not_null NOT NULL,
    priority integer DEFAULT 0 CONSTRAINT jobs_priority_not_null NOT NULL,
    pending_deps integer DEFAULT 0 CONSTRAINT jobs_pending_deps_not_null NOT NULL,
    attempts integer DEFAULT 0 CONSTRAINT jobs_attempts_not_null NOT NULL,
    worker_id character varying(64),
    started_at timestamp with time zone,
    pending_next_jobs jsonb,
    has_dependants boolean DEFAULT false CONSTRAINT jobs_has_dependants_not_null NOT NULL,
    run_at timestamp with time zone,
    error_fingerprint text,
    scheduled_at timestamp with time zone,
    unique_key character varying(255) DEFAULT NULL::character varying,
    spawned_by character varying(36),
    trace_context jsonb,
    retain_from timestamp with time zone DEFAULT now() CONSTRAINT jobs_retain_from_not_null NOT NULL,
    CONSTRAINT jobs_deps_is_array CHECK ((jsonb_typeof(dependent_on_jobs) = 'array'::text)),
    CONSTRAINT jobs_input_is_object CHECK ((jsonb_typeof(input_data) = 'object'::text)),
    CONSTRAINT jobs_status_check CHECK (((status)::text = ANY ('{queued,in_progress,completed,failed,cancelled,waiting_approval}'::text[])))
);


--
-- Name: jobs_failed_cancelled; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.jobs_failed_cancelled (
    id character varying(36) DEFAULT public.jobdesk_uuid7() CONSTRAINT jobs_id_not_null NOT NULL,
    type character varying(255) CONSTRAINT jobs_type_not_null NOT NULL,
    status character varying(32) DEFAULT 'queued'::character varying CONSTRAINT jobs_status_not_null NOT NULL,
    user_id integer DEFAULT 1,
    pipeline_id character varying(36),
    input_data jsonb CONSTRAINT jobs_input_data_not_null NOT NULL,
    result_data jsonb,
    error_message text,
    dependent_on_jobs jsonb DEFAULT '[]'::jsonb,
    retry_count integer DEFAULT 0 CONSTRAINT jobs_retry_count_not_null NOT NULL,
    next_retry_at timestamp with time zone,
    is_active boolean DEFAULT true CONSTRAINT jobs_is_active_not_null NOT NULL,
    created_at timestamp with time zone DEFAULT now() CONSTRAINT jobs_created_at_not_null NOT NULL,
    updated_at timestamp with time zone DEFAULT now() CONSTRAINT jobs_updated_at_not_null NOT NULL,
    completed_at timestamp with time zone,
    seq bigint CONSTRAINT jobs_seq_not_null NOT NULL,
    priority integer DEFAULT 0 CONSTRAINT jobs_priority_not_null NOT NULL,
    pending_deps integer DEFAULT 0 CONSTRAINT jobs_pending_deps_not_null NOT NULL,
    attempts integer DEFAULT 0 CONSTRAINT jobs_attempts_not_null NOT NULL,
    worker_id character varying(64),
    started_at timestamp with time zone,
    pending_next_jobs jsonb,
    has_dependants boolean DEFAULT false CONSTRAINT jobs_has_dependants_not_null NOT NULL,
    run_at timestamp with time zone,
    error_fingerprint text,
    scheduled_at timestamp with time zone,
    unique_key character varying(255) DEFAULT NULL::character varying,
    spawned_by character varying(36),
    trace_context jsonb,
    retain_from timestamp with time zone DEFAULT now() CONSTRAINT jobs_retain_from_not_null NOT NULL,
    CONSTRAINT jobs_deps_is_array CHECK ((jsonb_typeof(dependent_on_jobs) = 'array'::text)),
    CONSTRAINT jobs_input_is_object CHECK ((jsonb_typeof(input_data) = 'object'::text)),
    CONSTRAINT jobs_status_check CHECK (((status)::text = ANY ('{queued,in_progress,completed,failed,cancelled,waiting_approval}'::text[])))
);


--
-- Name: jobs_live; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.jobs_live (
    id character varying(36) DEFAULT public.jobdesk_uuid7() CONSTRAINT jobs_id_not_null NOT NULL,
    type character varying(255) CONSTRAINT jobs_type_not_null NOT NULL,
    status character varying(32) DEFAULT 'queued'::character varying CONSTRAINT jobs_status_not_null NOT NULL,
    user_id integer DEFAULT 1,
    pipeline_id character varying(36),
    input_data jsonb CONSTRAINT jobs_input_data_not_null NOT NULL,
    result_data jsonb,
    error_message text,
    dependent_on_jobs jsonb DEFAULT '[]'::jsonb,
    retry_count integer DEFAULT 0 CONSTRAINT jobs_retry_count_not_null NOT NULL,
    next_retry_at timestamp with time zone,
    is_active boolean DEFAULT true CONSTRAINT jobs_is_active_not_null NOT NULL,
    created_at timestamp with time zone DEFAULT now() CONSTRAINT jobs_created_at_not_null NOT NULL,
    updated_at timestamp with time zone DEFAULT now() CONSTRAINT jobs_updated_at_not_null NOT NULL,
    completed_at timestamp with time zone,
    seq bigint CONSTRAINT jobs_seq_not_null NOT NULL,
    priority integer DEFAULT 0 CONSTRAINT jobs_priority_not_null NOT NULL,
    pending_deps integer DEFAULT 0 CONSTRAINT jobs_pending_deps_not_null NOT NULL,
    attempts integer DEFAULT 0 CONSTRAINT jobs_attempts_not_null NOT NULL,
    worker_id character varying(64),
    started_at timestamp with time zone,
    pending_next_jobs jsonb,
    has_dependants boolean DEFAULT false CONSTRAINT jobs_has_dependants_not_null NOT NULL,
    run_at timestamp with time zone,
    error_fingerprint text,
    scheduled_at timestamp with time zone,
    unique_key character varying(255) DEFAULT NULL::character varying,
    spawned_by character varying(36),
    trace_context jsonb,
    retain_from timestamp with time zone DEFAULT now() CONSTRAINT jobs_retain_from_not_null NOT NULL,
    CONSTRAINT jobs_deps_is_array CHECK ((jsonb_typeof(dependent_on_jobs) = 'array'::text)),
    CONSTRAINT jobs_input_is_object CHECK ((jsonb_typeof(input_data) = 'object'::text)),
    CONSTRAINT jobs_status_check CHECK (((status)::text = ANY ('{queued,in_progress,completed,failed,cancelled,waiting_approval}'::text[])))
);


--
-- Name: jobs_other; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.jobs_other (
    id character varying(36) DEFAULT public.jobdesk_uuid7() CONSTRAINT jobs_id_not_null NOT NULL,
    type character varying(255) CONSTRAINT jobs_type_not_null NOT NULL,
    status character varying(32) DEFAULT 'queued'::character varying CONSTRAINT jobs_status_not_null NOT NULL,
    user_id integer DEFAULT 1,
    pipeline_id character varying(36),
    input_data jsonb CONSTRAINT jobs_input_data_not_null NOT NULL,
    result_data jsonb,
    error_message text,
    dependent_on_jobs jsonb DEFAULT '[]'::jsonb,
    retry_count integer DEFAULT 0 CONSTRAINT jobs_retry_count_not_null NOT NULL,
    next_retry_at timestamp with time zone,
    is_active boolean DEFAULT true CONSTRAINT jobs_is_active_not_null NOT NULL,
    created_at timestamp with time zone DEFAULT now() CONSTRAINT jobs_created_at_not_null NOT NULL,
    updated_at timestamp with time zone DEFAULT now() CONSTRAINT jobs_updated_at_not_null NOT NULL,
    completed_at timestamp with time zone,
    seq bigint CONSTRAINT jobs_seq_not_null NOT NULL,
    priority integer DEFAULT 0 CONSTRAINT jobs_priority_not_null NOT NULL,
    pending_deps integer DEFAULT 0 CONSTRAINT jobs_pending_deps_not_null NOT NULL,
    attempts integer DEFAULT 0 CONSTRAINT jobs_attempts_not_null NOT NULL,
    worker_id character varying(64),
    started_at timestamp with time zone,
    pending_next_jobs jsonb,
    has_dependants boolean DEFAULT false CONSTRAINT jobs_has_dependants_not_null NOT NULL,
    run_at timestamp with time zone,
    error_fingerprint text,
    scheduled_at timestamp with time zone,
    unique_key character varying(255) DEFAULT NULL::character varying,
    spawned_by character varying(36),
    trace_context jsonb,
    retain_from timestamp with time zone DEFAULT now() CONSTRAINT jobs_retain_from_not_null NOT NULL,
    CONSTRAINT jobs_deps_is_array CHECK ((jsonb_typeof(dependent_on_jobs) = 'array'::text)),
    CONSTRAINT jobs_input_is_object CHECK ((jsonb_typeof(input_data) = 'object'::text)),
    CONSTRAINT jobs_status_check CHECK (((status)::text = ANY ('{queued,in_progress,completed,failed,cancelled,waiting_approval}'::text[])))
);


--
-- Name: jobs_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.jobs ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.jobs_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: schedule_ticks; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.schedule_ticks (
    schedule text NOT NULL,
    tick_at timestamp with time zone NOT NULL,
    job_id character varying(36),
    fired_at timestamp with time zone DEFAULT now() NOT NULL,
    manual boolean DEFAULT false NOT NULL
);


--
-- Name: schedules; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.schedules (
    name text NOT NULL,
    cron text,
    every_s double precision,
    timezone text DEFAULT 'UTC'::text NOT NULL,
    type character varying(255) NOT NULL,
    input_data jsonb DEFAULT '{}'::jsonb NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    misfire text DEFAULT 'skip'::text NOT NULL,
    overlap text DEFAULT 'allow'::text NOT NULL,
    paused boolean DEFAULT false NOT NULL,
    next_tick_at timestamp with time zone NOT NULL,
    last_tick_at timestamp with time zone,
    last_job_id character varying(36),
    source text DEFAULT 'cli'::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT schedules_every_s_check CHECK ((every_s >= (1)::double precision)),
    CONSTRAINT schedules_input_is_object CHECK ((jsonb_typeof(input_data) = 'object'::text)),
    CONSTRAINT schedules_misfire_check CHECK ((misfire = ANY (ARRAY['skip'::text, 'once'::text, 'all'::text]))),
    CONSTRAINT schedules_one_rule CHECK (((cron IS NULL) <> (every_s IS NULL))),
    CONSTRAINT schedules_overlap_check CHECK ((overlap = ANY (ARRAY['allow'::text, 'skip'::text])))
);


--
-- Name: type_controls; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.type_controls (
    type character varying(255) NOT NULL,
    paused boolean DEFAULT false NOT NULL,
    paused_by text,
    paused_at timestamp with time zone,
    reason text,
    max_running integer,
    rate_max integer,
    rate_period interval,
    user_max_running integer,
    user_rate_max integer,
    user_rate_period interval,
    limits_set_by text,
    limits_set_at timestamp with time zone,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT type_controls_check CHECK (((rate_max IS NULL) = (rate_period IS NULL))),
    CONSTRAINT type_controls_check1 CHECK (((user_rate_max IS NULL) = (user_rate_period IS NULL))),
    CONSTRAINT type_controls_max_running_check CHECK ((max_running >= 0)),
    CONSTRAINT type_controls_rate_max_check CHECK ((rate_max >= 1)),
    CONSTRAINT type_controls_rate_period_check CHECK ((rate_period > '00:00:00'::interval)),
    CONSTRAINT type_controls_type_check CHECK (((type)::text <> ''::text)),
    CONSTRAINT type_controls_user_max_running_check CHECK ((user_max_running >= 0)),
    CONSTRAINT type_controls_user_rate_max_check CHECK ((user_rate_max >= 1)),
    CONSTRAINT type_controls_user_rate_period_check CHECK ((user_rate_period > '00:00:00'::interval))
);


--
-- Name: type_limits; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.type_limits (
    type character varying(255) NOT NULL,
    max_running integer NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    env_max_running integer,
    CONSTRAINT type_limits_max_running_check CHECK ((max_running >= 0))
);


--
-- Name: users; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.users (
    id integer NOT NULL,
    name text,
    email text,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: users_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.users ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME public.users_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: workers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.workers (
    id character varying(64) NOT NULL,
    host text NOT NULL,
    pid integer NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    heartbeat_at timestamp with time zone DEFAULT now() NOT NULL,
    concurrency integer NOT NULL,
    job_types text[] DEFAULT '{}'::text[] NOT NULL,
    version text NOT NULL,
    state character varying(16) DEFAULT 'running'::character varying NOT NULL,
    requested character varying(16),
    stopped_at timestamp with time zone,
    CONSTRAINT workers_requested_check CHECK (((requested)::text = ANY ((ARRAY['pause'::character varying, 'resume'::character varying, 'drain'::character varying, 'stop'::character varying])::text[]))),
    CONSTRAINT workers_state_check CHECK (((state)::text = ANY ((ARRAY['running'::character varying, 'paused'::character varying, 'draining'::character varying, 'stopped'::character varying, 'lost'::character varying])::text[])))
);


--
-- Name: jobs_completed; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.jobs ATTACH PARTITION public.jobs_completed FOR VALUES IN ('completed');


--
-- Name: jobs_completed_later; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.jobs_completed ATTACH PARTITION public.jobs_completed_later FOR VALUES FROM ('<time of migration 041>') TO (MAXVALUE);


--
-- Name: jobs_completed_start; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.jobs_completed ATTACH PARTITION public.jobs_completed_start FOR VALUES FROM (MINVALUE) TO ('<time of migration 041>');


--
-- Name: jobs_failed_cancelled; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.jobs ATTACH PARTITION public.jobs_failed_cancelled FOR VALUES IN ('failed', 'cancelled');


--
-- Name: jobs_live; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.jobs ATTACH PARTITION public.jobs_live FOR VALUES IN ('queued', 'in_progress', 'waiting_approval');


--
-- Name: jobs_other; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.jobs ATTACH PARTITION public.jobs_other DEFAULT;


--
-- Name: job_stack_requests id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_stack_requests ALTER COLUMN id SET DEFAULT nextval('public.job_stack_requests_id_seq'::regclass);


--
-- Name: api_idempotency_keys api_idempotency_keys_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_idempotency_keys
    ADD CONSTRAINT api_idempotency_keys_pkey PRIMARY KEY (owner, key);


--
-- Name: api_tokens api_tokens_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_pkey PRIMARY KEY (id);


--
-- Name: api_tokens api_tokens_token_hash_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_token_hash_key UNIQUE (token_hash);


--
-- Name: audit_log audit_log_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.audit_log
    ADD CONSTRAINT audit_log_pkey PRIMARY KEY (id);


--
-- Name: flow_limits flow_limits_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.flow_limits
    ADD CONSTRAINT flow_limits_pkey PRIMARY KEY (type);


--
-- Name: flow_user_starts flow_user_starts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.flow_user_starts
    ADD CONSTRAINT flow_user_starts_pkey PRIMARY KEY (type, user_id);


--
-- Name: job_attempts job_attempts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_attempts
    ADD CONSTRAINT job_attempts_pkey PRIMARY KEY (id);


--
-- Name: job_dependencies job_dependencies_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_dependencies
    ADD CONSTRAINT job_dependencies_pkey PRIMARY KEY (job_id, depends_on_id);


--
-- Name: job_events job_events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_events
    ADD CONSTRAINT job_events_pkey PRIMARY KEY (id);


--
-- Name: job_logs job_logs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_logs
    ADD CONSTRAINT job_logs_pkey PRIMARY KEY (job_id, attempt, seq);


--
-- Name: job_progress job_progress_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_progress
    ADD CONSTRAINT job_progress_pkey PRIMARY KEY (job_id);


--
-- Name: job_queue_depth job_queue_depth_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_queue_depth
    ADD CONSTRAINT job_queue_depth_pkey PRIMARY KEY (status, bucket);


--
-- Name: job_stack_requests job_stack_requests_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_stack_requests
    ADD CONSTRAINT job_stack_requests_pkey PRIMARY KEY (id);


--
-- Name: job_stacks job_stacks_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_stacks
    ADD CONSTRAINT job_stacks_pkey PRIMARY KEY (job_id);


--
-- Name: job_stats_5s job_stats_5s_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_stats_5s
    ADD CONSTRAINT job_stats_5s_pkey PRIMARY KEY (bucket, type);


--
-- Name: job_stats_hist job_stats_hist_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_stats_hist
    ADD CONSTRAINT job_stats_hist_pkey PRIMARY KEY (grain, bucket, metric, type, bin);


--
-- Name: job_stats job_stats_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_stats
    ADD CONSTRAINT job_stats_pkey PRIMARY KEY (grain, bucket, type);


--
-- Name: job_steps job_steps_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_steps
    ADD CONSTRAINT job_steps_pkey PRIMARY KEY (job_id, name);


--
-- Name: job_waits job_waits_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_waits
    ADD CONSTRAINT job_waits_pkey PRIMARY KEY (job_id);


--
-- Name: jobdesk_leases jobdesk_leases_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.jobdesk_leases
    ADD CONSTRAINT jobdesk_leases_pkey PRIMARY KEY (name);


--
-- Name: jobdesk_migrations jobdesk_migrations_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.jobdesk_migrations
    ADD CONSTRAINT jobdesk_migrations_pkey PRIMARY KEY (version);


--
-- Name: jobs_completed_later jobs_completed_later_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.jobs_completed_later
    ADD CONSTRAINT jobs_completed_later_pkey PRIMARY KEY (id);


--
-- Name: jobs_completed_start jobs_completed_start_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.jobs_completed_start
    ADD CONSTRAINT jobs_completed_start_pkey PRIMARY KEY (id);


--
-- Name: jobs_failed_cancelled jobs_failed_cancelled_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.jobs_failed_cancelled
    ADD CONSTRAINT jobs_failed_cancelled_pkey PRIMARY KEY (id);


--
-- Name: jobs_live jobs_live_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.jobs_live
    ADD CONSTRAINT jobs_live_pkey PRIMARY KEY (id);


--
-- Name: jobs_other jobs_other_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.jobs_other
    ADD CONSTRAINT jobs_other_pkey PRIMARY KEY (id);


--
-- Name: schedule_ticks schedule_ticks_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.schedule_ticks
    ADD CONSTRAINT schedule_ticks_pkey PRIMARY KEY (schedule, tick_at, manual);


--
-- Name: schedules schedules_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.schedules
    ADD CONSTRAINT schedules_pkey PRIMARY KEY (name);


--
-- Name: type_controls type_controls_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.type_controls
    ADD CONSTRAINT type_controls_pkey PRIMARY KEY (type);


--
-- Name: type_limits type_limits_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.type_limits
    ADD CONSTRAINT type_limits_pkey PRIMARY KEY (type);


--
-- Name: users users_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_pkey PRIMARY KEY (id);


--
-- Name: workers workers_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.workers
    ADD CONSTRAINT workers_pkey PRIMARY KEY (id);


--
-- Name: api_idempotency_keys_created_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX api_idempotency_keys_created_idx ON public.api_idempotency_keys USING btree (created_at);


--
-- Name: api_tokens_live_name_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX api_tokens_live_name_idx ON public.api_tokens USING btree (name) WHERE (revoked_at IS NULL);


--
-- Name: audit_log_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX audit_log_at_idx ON public.audit_log USING btree (at);


--
-- Name: job_attempts_failed_recent_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX job_attempts_failed_recent_idx ON public.job_attempts USING btree (finished_at) INCLUDE (error_fingerprint, job_type) WHERE ((outcome)::text = ANY ((ARRAY['failed'::character varying, 'lost'::character varying, 'interrupted'::character varying])::text[]));


--
-- Name: job_attempts_job_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX job_attempts_job_idx ON public.job_attempts USING btree (job_id, attempt);


--
-- Name: job_dependencies_parent_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX job_dependencies_parent_idx ON public.job_dependencies USING btree (depends_on_id);


--
-- Name: job_events_key_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX job_events_key_idx ON public.job_events USING btree (key, id);


--
-- Name: job_stack_requests_worker; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX job_stack_requests_worker ON public.job_stack_requests USING btree (worker_id);


--
-- Name: job_waits_event_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX job_waits_event_idx ON public.job_waits USING btree (event_key) WHERE (event_key IS NOT NULL);


--
-- Name: jobs_error_fingerprint_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_error_fingerprint_idx ON ONLY public.jobs USING btree (error_fingerprint, seq) WHERE (error_fingerprint IS NOT NULL);


--
-- Name: jobs_completed_error_fingerprint_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_completed_error_fingerprint_seq_idx ON ONLY public.jobs_completed USING btree (error_fingerprint, seq) WHERE (error_fingerprint IS NOT NULL);


--
-- Name: jobs_input_data_path_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_input_data_path_idx ON ONLY public.jobs USING gin (input_data jsonb_path_ops) WHERE (input_data <> '{}'::jsonb);


--
-- Name: jobs_completed_input_data_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_completed_input_data_idx ON ONLY public.jobs_completed USING gin (input_data jsonb_path_ops) WHERE (input_data <> '{}'::jsonb);


--
-- Name: jobs_completed_later_error_fingerprint_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_completed_later_error_fingerprint_seq_idx ON public.jobs_completed_later USING btree (error_fingerprint, seq) WHERE (error_fingerprint IS NOT NULL);


--
-- Name: jobs_completed_later_input_data_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_completed_later_input_data_idx ON public.jobs_completed_later USING gin (input_data jsonb_path_ops) WHERE (input_data <> '{}'::jsonb);


--
-- Name: jobs_raw_error_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_raw_error_idx ON ONLY public.jobs USING btree ("left"(split_part(error_message, '
'::text, 1), 300), seq) WHERE ((error_fingerprint IS NULL) AND (error_message IS NOT NULL));


--
-- Name: jobs_completed_left_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_completed_left_seq_idx ON ONLY public.jobs_completed USING btree ("left"(split_part(error_message, '
'::text, 1), 300), seq) WHERE ((error_fingerprint IS NULL) AND (error_message IS NOT NULL));


--
-- Name: jobs_completed_later_left_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_completed_later_left_seq_idx ON public.jobs_completed_later USING btree ("left"(split_part(error_message, '
'::text, 1), 300), seq) WHERE ((error_fingerprint IS NULL) AND (error_message IS NOT NULL));


--
-- Name: jobs_pipeline_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_pipeline_idx ON ONLY public.jobs USING btree (pipeline_id, seq) WHERE (pipeline_id IS NOT NULL);


--
-- Name: jobs_completed_pipeline_id_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_completed_pipeline_id_seq_idx ON ONLY public.jobs_completed USING btree (pipeline_id, seq) WHERE (pipeline_id IS NOT NULL);


--
-- Name: jobs_completed_later_pipeline_id_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_completed_later_pipeline_id_seq_idx ON public.jobs_completed_later USING btree (pipeline_id, seq) WHERE (pipeline_id IS NOT NULL);


--
-- Name: jobs_id_tail_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_id_tail_idx ON ONLY public.jobs USING btree ("right"((id)::text, 8));


--
-- Name: jobs_completed_right_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_completed_right_idx ON ONLY public.jobs_completed USING btree ("right"((id)::text, 8));


--
-- Name: jobs_completed_later_right_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_completed_later_right_idx ON public.jobs_completed_later USING btree ("right"((id)::text, 8));


--
-- Name: jobs_pipeline_recent_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_pipeline_recent_idx ON ONLY public.jobs USING btree (seq DESC) WHERE (pipeline_id IS NOT NULL);


--
-- Name: jobs_completed_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_completed_seq_idx ON ONLY public.jobs_completed USING btree (seq DESC) WHERE (pipeline_id IS NOT NULL);


--
-- Name: jobs_completed_later_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_completed_later_seq_idx ON public.jobs_completed_later USING btree (seq DESC) WHERE (pipeline_id IS NOT NULL);


--
-- Name: jobs_status_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_status_idx ON ONLY public.jobs USING btree (status, seq) WHERE ((status)::text <> 'in_progress'::text);


--
-- Name: jobs_completed_status_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_completed_status_seq_idx ON ONLY public.jobs_completed USING btree (status, seq) WHERE ((status)::text <> 'in_progress'::text);


--
-- Name: jobs_completed_later_status_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_completed_later_status_seq_idx ON public.jobs_completed_later USING btree (status, seq) WHERE ((status)::text <> 'in_progress'::text);


--
-- Name: jobs_completed_start_error_fingerprint_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_completed_start_error_fingerprint_seq_idx ON public.jobs_completed_start USING btree (error_fingerprint, seq) WHERE (error_fingerprint IS NOT NULL);


--
-- Name: jobs_completed_start_input_data_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_completed_start_input_data_idx ON public.jobs_completed_start USING gin (input_data jsonb_path_ops) WHERE (input_data <> '{}'::jsonb);


--
-- Name: jobs_completed_start_left_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_completed_start_left_seq_idx ON public.jobs_completed_start USING btree ("left"(split_part(error_message, '
'::text, 1), 300), seq) WHERE ((error_fingerprint IS NULL) AND (error_message IS NOT NULL));


--
-- Name: jobs_completed_start_pipeline_id_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_completed_start_pipeline_id_seq_idx ON public.jobs_completed_start USING btree (pipeline_id, seq) WHERE (pipeline_id IS NOT NULL);


--
-- Name: jobs_completed_start_right_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_completed_start_right_idx ON public.jobs_completed_start USING btree ("right"((id)::text, 8));


--
-- Name: jobs_completed_start_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_completed_start_seq_idx ON public.jobs_completed_start USING btree (seq DESC) WHERE (pipeline_id IS NOT NULL);


--
-- Name: jobs_completed_start_status_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_completed_start_status_seq_idx ON public.jobs_completed_start USING btree (status, seq) WHERE ((status)::text <> 'in_progress'::text);


--
-- Name: jobs_failed_cancelled_error_fingerprint_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_failed_cancelled_error_fingerprint_seq_idx ON public.jobs_failed_cancelled USING btree (error_fingerprint, seq) WHERE (error_fingerprint IS NOT NULL);


--
-- Name: jobs_failed_cancelled_input_data_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_failed_cancelled_input_data_idx ON public.jobs_failed_cancelled USING gin (input_data jsonb_path_ops) WHERE (input_data <> '{}'::jsonb);


--
-- Name: jobs_failed_cancelled_left_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_failed_cancelled_left_seq_idx ON public.jobs_failed_cancelled USING btree ("left"(split_part(error_message, '
'::text, 1), 300), seq) WHERE ((error_fingerprint IS NULL) AND (error_message IS NOT NULL));


--
-- Name: jobs_failed_cancelled_pipeline_id_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_failed_cancelled_pipeline_id_seq_idx ON public.jobs_failed_cancelled USING btree (pipeline_id, seq) WHERE (pipeline_id IS NOT NULL);


--
-- Name: jobs_failed_cancelled_right_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_failed_cancelled_right_idx ON public.jobs_failed_cancelled USING btree ("right"((id)::text, 8));


--
-- Name: jobs_failed_cancelled_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_failed_cancelled_seq_idx ON public.jobs_failed_cancelled USING btree (seq DESC) WHERE (pipeline_id IS NOT NULL);


--
-- Name: jobs_failed_cancelled_status_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_failed_cancelled_status_seq_idx ON public.jobs_failed_cancelled USING btree (status, seq) WHERE ((status)::text <> 'in_progress'::text);


--
-- Name: jobs_failed_fingerprint_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_failed_fingerprint_idx ON public.jobs_failed_cancelled USING btree (error_fingerprint, type, updated_at) WHERE ((status)::text = 'failed'::text);


--
-- Name: jobs_failed_unprinted_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_failed_unprinted_idx ON public.jobs_failed_cancelled USING btree (type) WHERE (((status)::text = 'failed'::text) AND (error_fingerprint IS NULL));


--
-- Name: jobs_finished_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_finished_idx ON public.jobs_failed_cancelled USING btree (status, updated_at);


--
-- Name: jobs_in_progress_worker_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_in_progress_worker_idx ON public.jobs_live USING btree (worker_id) WHERE ((status)::text = 'in_progress'::text);


--
-- Name: jobs_live_error_fingerprint_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_live_error_fingerprint_seq_idx ON public.jobs_live USING btree (error_fingerprint, seq) WHERE (error_fingerprint IS NOT NULL);


--
-- Name: jobs_live_input_data_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_live_input_data_idx ON public.jobs_live USING gin (input_data jsonb_path_ops) WHERE (input_data <> '{}'::jsonb);


--
-- Name: jobs_live_left_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_live_left_seq_idx ON public.jobs_live USING btree ("left"(split_part(error_message, '
'::text, 1), 300), seq) WHERE ((error_fingerprint IS NULL) AND (error_message IS NOT NULL));


--
-- Name: jobs_live_pipeline_id_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_live_pipeline_id_seq_idx ON public.jobs_live USING btree (pipeline_id, seq) WHERE (pipeline_id IS NOT NULL);


--
-- Name: jobs_live_right_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_live_right_idx ON public.jobs_live USING btree ("right"((id)::text, 8));


--
-- Name: jobs_live_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_live_seq_idx ON public.jobs_live USING btree (seq DESC) WHERE (pipeline_id IS NOT NULL);


--
-- Name: jobs_live_status_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_live_status_seq_idx ON public.jobs_live USING btree (status, seq) WHERE ((status)::text <> 'in_progress'::text);


--
-- Name: jobs_other_error_fingerprint_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_other_error_fingerprint_seq_idx ON public.jobs_other USING btree (error_fingerprint, seq) WHERE (error_fingerprint IS NOT NULL);


--
-- Name: jobs_other_input_data_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_other_input_data_idx ON public.jobs_other USING gin (input_data jsonb_path_ops) WHERE (input_data <> '{}'::jsonb);


--
-- Name: jobs_other_left_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_other_left_seq_idx ON public.jobs_other USING btree ("left"(split_part(error_message, '
'::text, 1), 300), seq) WHERE ((error_fingerprint IS NULL) AND (error_message IS NOT NULL));


--
-- Name: jobs_other_pipeline_id_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_other_pipeline_id_seq_idx ON public.jobs_other USING btree (pipeline_id, seq) WHERE (pipeline_id IS NOT NULL);


--
-- Name: jobs_other_right_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_other_right_idx ON public.jobs_other USING btree ("right"((id)::text, 8));


--
-- Name: jobs_other_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_other_seq_idx ON public.jobs_other USING btree (seq DESC) WHERE (pipeline_id IS NOT NULL);


--
-- Name: jobs_other_status_seq_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_other_status_seq_idx ON public.jobs_other USING btree (status, seq) WHERE ((status)::text <> 'in_progress'::text);


--
-- Name: jobs_ready_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_ready_idx ON public.jobs_live USING btree (type, priority DESC, seq) WHERE (((status)::text = 'queued'::text) AND (pending_deps = 0) AND is_active AND (run_at IS NULL));


--
-- Name: jobs_unique_key_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX jobs_unique_key_idx ON public.jobs_live USING btree (unique_key) WHERE ((unique_key IS NOT NULL) AND ((status)::text = ANY ((ARRAY['queued'::character varying, 'in_progress'::character varying, 'waiting_approval'::character varying])::text[])));


--
-- Name: jobs_waiting_approval_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_waiting_approval_idx ON public.jobs_live USING btree (updated_at) WHERE ((status)::text = 'waiting_approval'::text);


--
-- Name: jobs_waiting_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_waiting_idx ON public.jobs_live USING btree (run_at) WHERE (((status)::text = 'queued'::text) AND (pending_deps = 0) AND is_active AND (run_at IS NOT NULL));


--
-- Name: schedule_ticks_job_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX schedule_ticks_job_idx ON public.schedule_ticks USING btree (job_id) WHERE (job_id IS NOT NULL);


--
-- Name: schedules_due_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX schedules_due_idx ON public.schedules USING btree (next_tick_at) WHERE (NOT paused);


--
-- Name: workers_live_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX workers_live_idx ON public.workers USING btree (heartbeat_at) WHERE ((state)::text = ANY ((ARRAY['running'::character varying, 'paused'::character varying, 'draining'::character varying])::text[]));


--
-- Name: jobs_completed_error_fingerprint_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_error_fingerprint_idx ATTACH PARTITION public.jobs_completed_error_fingerprint_seq_idx;


--
-- Name: jobs_completed_input_data_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_input_data_path_idx ATTACH PARTITION public.jobs_completed_input_data_idx;


--
-- Name: jobs_completed_later_error_fingerprint_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_completed_error_fingerprint_seq_idx ATTACH PARTITION public.jobs_completed_later_error_fingerprint_seq_idx;


--
-- Name: jobs_completed_later_input_data_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_completed_input_data_idx ATTACH PARTITION public.jobs_completed_later_input_data_idx;


--
-- Name: jobs_completed_later_left_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_completed_left_seq_idx ATTACH PARTITION public.jobs_completed_later_left_seq_idx;


--
-- Name: jobs_completed_later_pipeline_id_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_completed_pipeline_id_seq_idx ATTACH PARTITION public.jobs_completed_later_pipeline_id_seq_idx;


--
-- Name: jobs_completed_later_right_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_completed_right_idx ATTACH PARTITION public.jobs_completed_later_right_idx;


--
-- Name: jobs_completed_later_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_completed_seq_idx ATTACH PARTITION public.jobs_completed_later_seq_idx;


--
-- Name: jobs_completed_later_status_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_completed_status_seq_idx ATTACH PARTITION public.jobs_completed_later_status_seq_idx;


--
-- Name: jobs_completed_left_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_raw_error_idx ATTACH PARTITION public.jobs_completed_left_seq_idx;


--
-- Name: jobs_completed_pipeline_id_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_pipeline_idx ATTACH PARTITION public.jobs_completed_pipeline_id_seq_idx;


--
-- Name: jobs_completed_right_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_id_tail_idx ATTACH PARTITION public.jobs_completed_right_idx;


--
-- Name: jobs_completed_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_pipeline_recent_idx ATTACH PARTITION public.jobs_completed_seq_idx;


--
-- Name: jobs_completed_start_error_fingerprint_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_completed_error_fingerprint_seq_idx ATTACH PARTITION public.jobs_completed_start_error_fingerprint_seq_idx;


--
-- Name: jobs_completed_start_input_data_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_completed_input_data_idx ATTACH PARTITION public.jobs_completed_start_input_data_idx;


--
-- Name: jobs_completed_start_left_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_completed_left_seq_idx ATTACH PARTITION public.jobs_completed_start_left_seq_idx;


--
-- Name: jobs_completed_start_pipeline_id_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_completed_pipeline_id_seq_idx ATTACH PARTITION public.jobs_completed_start_pipeline_id_seq_idx;


--
-- Name: jobs_completed_start_right_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_completed_right_idx ATTACH PARTITION public.jobs_completed_start_right_idx;


--
-- Name: jobs_completed_start_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_completed_seq_idx ATTACH PARTITION public.jobs_completed_start_seq_idx;


--
-- Name: jobs_completed_start_status_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_completed_status_seq_idx ATTACH PARTITION public.jobs_completed_start_status_seq_idx;


--
-- Name: jobs_completed_status_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_status_idx ATTACH PARTITION public.jobs_completed_status_seq_idx;


--
-- Name: jobs_failed_cancelled_error_fingerprint_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_error_fingerprint_idx ATTACH PARTITION public.jobs_failed_cancelled_error_fingerprint_seq_idx;


--
-- Name: jobs_failed_cancelled_input_data_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_input_data_path_idx ATTACH PARTITION public.jobs_failed_cancelled_input_data_idx;


--
-- Name: jobs_failed_cancelled_left_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_raw_error_idx ATTACH PARTITION public.jobs_failed_cancelled_left_seq_idx;


--
-- Name: jobs_failed_cancelled_pipeline_id_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_pipeline_idx ATTACH PARTITION public.jobs_failed_cancelled_pipeline_id_seq_idx;


--
-- Name: jobs_failed_cancelled_right_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_id_tail_idx ATTACH PARTITION public.jobs_failed_cancelled_right_idx;


--
-- Name: jobs_failed_cancelled_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_pipeline_recent_idx ATTACH PARTITION public.jobs_failed_cancelled_seq_idx;


--
-- Name: jobs_failed_cancelled_status_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_status_idx ATTACH PARTITION public.jobs_failed_cancelled_status_seq_idx;


--
-- Name: jobs_live_error_fingerprint_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_error_fingerprint_idx ATTACH PARTITION public.jobs_live_error_fingerprint_seq_idx;


--
-- Name: jobs_live_input_data_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_input_data_path_idx ATTACH PARTITION public.jobs_live_input_data_idx;


--
-- Name: jobs_live_left_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_raw_error_idx ATTACH PARTITION public.jobs_live_left_seq_idx;


--
-- Name: jobs_live_pipeline_id_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_pipeline_idx ATTACH PARTITION public.jobs_live_pipeline_id_seq_idx;


--
-- Name: jobs_live_right_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_id_tail_idx ATTACH PARTITION public.jobs_live_right_idx;


--
-- Name: jobs_live_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_pipeline_recent_idx ATTACH PARTITION public.jobs_live_seq_idx;


--
-- Name: jobs_live_status_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_status_idx ATTACH PARTITION public.jobs_live_status_seq_idx;


--
-- Name: jobs_other_error_fingerprint_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_error_fingerprint_idx ATTACH PARTITION public.jobs_other_error_fingerprint_seq_idx;


--
-- Name: jobs_other_input_data_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_input_data_path_idx ATTACH PARTITION public.jobs_other_input_data_idx;


--
-- Name: jobs_other_left_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_raw_error_idx ATTACH PARTITION public.jobs_other_left_seq_idx;


--
-- Name: jobs_other_pipeline_id_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_pipeline_idx ATTACH PARTITION public.jobs_other_pipeline_id_seq_idx;


--
-- Name: jobs_other_right_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_id_tail_idx ATTACH PARTITION public.jobs_other_right_idx;


--
-- Name: jobs_other_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_pipeline_recent_idx ATTACH PARTITION public.jobs_other_seq_idx;


--
-- Name: jobs_other_status_seq_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.jobs_status_idx ATTACH PARTITION public.jobs_other_status_seq_idx;


--
-- Name: job_events job_events_wake; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER job_events_wake AFTER INSERT ON public.job_events REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT EXECUTE FUNCTION public.jobdesk_events_wake();


--
-- Name: jobs_live jobs_after_insert_edges; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_after_insert_edges AFTER INSERT ON public.jobs_live FOR EACH ROW WHEN ((jsonb_array_length(new.dependent_on_jobs) > 0)) EXECUTE FUNCTION public.jobdesk_jobs_after_insert_edges();


--
-- Name: jobs_live jobs_before_insert; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_before_insert BEFORE INSERT ON public.jobs_live FOR EACH ROW WHEN (((new.dependent_on_jobs <> '[]'::jsonb) OR (new.pending_deps <> 0) OR (new.next_retry_at IS NOT NULL) OR (new.scheduled_at IS NOT NULL))) EXECUTE FUNCTION public.jobdesk_jobs_before_insert();


--
-- Name: jobs jobs_check_ids; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_check_ids AFTER INSERT ON public.jobs REFERENCING NEW TABLE AS new_ids FOR EACH STATEMENT EXECUTE FUNCTION public.jobdesk_jobs_check_ids();


--
-- Name: jobs jobs_forget_children; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_forget_children AFTER DELETE ON public.jobs REFERENCING OLD TABLE AS gone_rows FOR EACH STATEMENT EXECUTE FUNCTION public.jobdesk_jobs_forget_children();


--
-- Name: jobs jobs_keep_id; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_keep_id BEFORE UPDATE OF id ON public.jobs FOR EACH ROW WHEN (((new.id)::text IS DISTINCT FROM (old.id)::text)) EXECUTE FUNCTION public.jobdesk_jobs_keep_id();


--
-- Name: jobs_live jobs_live_check_ids; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_live_check_ids AFTER INSERT ON public.jobs_live REFERENCING NEW TABLE AS new_ids FOR EACH STATEMENT EXECUTE FUNCTION public.jobdesk_jobs_check_ids();


--
-- Name: jobs_live jobs_live_forget_children; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_live_forget_children AFTER DELETE ON public.jobs_live REFERENCING OLD TABLE AS gone_rows FOR EACH STATEMENT EXECUTE FUNCTION public.jobdesk_jobs_forget_children();


--
-- Name: jobs_live jobs_live_notify_changes_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_live_notify_changes_delete AFTER DELETE ON public.jobs_live REFERENCING OLD TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION public.jobdesk_notify_job_changes();


--
-- Name: jobs_live jobs_live_notify_changes_insert; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_live_notify_changes_insert AFTER INSERT ON public.jobs_live REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION public.jobdesk_notify_inserted_jobs();


--
-- Name: jobs_live jobs_live_notify_changes_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_live_notify_changes_update AFTER UPDATE ON public.jobs_live REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION public.jobdesk_notify_job_changes();


--
-- Name: jobs jobs_moving_in; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_moving_in BEFORE UPDATE OF status ON public.jobs FOR EACH ROW WHEN ((((old.status)::text = ANY ((ARRAY['completed'::character varying, 'failed'::character varying, 'cancelled'::character varying])::text[])) AND ((new.status)::text = ANY ((ARRAY['queued'::character varying, 'in_progress'::character varying, 'waiting_approval'::character varying])::text[])))) EXECUTE FUNCTION public.jobdesk_jobs_moving_in();


--
-- Name: jobs_live jobs_new_user_check; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_new_user_check BEFORE INSERT ON public.jobs_live FOR EACH ROW WHEN ((new.user_id <> 1)) EXECUTE FUNCTION public.jobdesk_check_job_user();


--
-- Name: jobs jobs_notify_changes_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_notify_changes_delete AFTER DELETE ON public.jobs REFERENCING OLD TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION public.jobdesk_notify_job_changes();


--
-- Name: jobs jobs_notify_changes_insert; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_notify_changes_insert AFTER INSERT ON public.jobs REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION public.jobdesk_notify_inserted_jobs();


--
-- Name: jobs jobs_notify_changes_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_notify_changes_update AFTER UPDATE ON public.jobs REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION public.jobdesk_notify_job_changes();


--
-- Name: jobs jobs_notify_requeue; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_notify_requeue AFTER UPDATE OF status, pending_deps, is_active ON public.jobs FOR EACH ROW WHEN ((((new.status)::text = 'queued'::text) AND (new.pending_deps = 0) AND new.is_active AND (((old.status)::text <> 'queued'::text) OR (old.pending_deps <> 0) OR (NOT old.is_active)))) EXECUTE FUNCTION public.jobdesk_notify_new_jobs();


--
-- Name: jobs_failed_cancelled jobs_release_dependants; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_release_dependants AFTER DELETE ON public.jobs_failed_cancelled FOR EACH ROW WHEN (old.has_dependants) EXECUTE FUNCTION public.jobdesk_jobs_release_on_move();


--
-- Name: jobs_live jobs_release_dependants; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_release_dependants AFTER DELETE ON public.jobs_live FOR EACH ROW WHEN (old.has_dependants) EXECUTE FUNCTION public.jobdesk_jobs_release_on_move();


--
-- Name: jobs jobs_rescheduled; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_rescheduled AFTER UPDATE OF scheduled_at ON public.jobs FOR EACH ROW WHEN ((((new.status)::text = 'queued'::text) AND (new.scheduled_at IS DISTINCT FROM old.scheduled_at))) EXECUTE FUNCTION public.jobdesk_jobs_rescheduled();


--
-- Name: jobs jobs_retain_from; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_retain_from BEFORE UPDATE OF status ON public.jobs FOR EACH ROW WHEN ((((new.status)::text = 'completed'::text) AND ((old.status)::text <> 'completed'::text) AND (new.retain_from = old.retain_from))) EXECUTE FUNCTION public.jobdesk_jobs_retain_from();


--
-- Name: jobs jobs_truncate_children; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_truncate_children AFTER TRUNCATE ON public.jobs FOR EACH STATEMENT EXECUTE FUNCTION public.jobdesk_jobs_truncate_children();


--
-- Name: jobs jobs_user_check; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_user_check BEFORE UPDATE OF user_id ON public.jobs FOR EACH ROW WHEN ((new.user_id <> 1)) EXECUTE FUNCTION public.jobdesk_check_job_user();


--
-- Name: jobs_live jobs_wake_parent; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_wake_parent AFTER DELETE ON public.jobs_live FOR EACH ROW WHEN ((old.spawned_by IS NOT NULL)) EXECUTE FUNCTION public.jobdesk_jobs_wake_parent_on_move();


--
-- Name: users users_keep_job_owners; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER users_keep_job_owners BEFORE DELETE OR UPDATE OF id ON public.users FOR EACH ROW EXECUTE FUNCTION public.jobdesk_keep_job_owners();


--
-- Name: api_tokens api_tokens_user_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id);


--
-- Name: schedule_ticks schedule_ticks_schedule_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.schedule_ticks
    ADD CONSTRAINT schedule_ticks_schedule_fkey FOREIGN KEY (schedule) REFERENCES public.schedules(name) ON DELETE CASCADE;

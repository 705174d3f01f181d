-- jobdesk schema, part 22: flow control. Rate limits per type and per (type, user), concurrency
-- limits per (type, user), and fair share between users, all kept in the claim across every
-- worker and host.
--
-- * `flow_limits`: one row per type with any of these. Workers upsert it from JOB_RATE_LIMITS,
--   JOB_USER_RATE_LIMITS, JOB_USER_LIMITS and JOB_FAIR_SHARE when they start. A claim of such a
--   type locks its row, so the claims of one type are taken one at a time across the fleet.
--   `starts` is a sliding log: the last `rate_max` start times of the type, oldest first. A
--   claim may start as many jobs as leave at most `rate_max` starts in the last `rate_period`,
--   which holds for every window of that length (a token bucket of the same size lets twice
--   as many through a window that straddles a refill).
-- * `flow_user_starts`: the same log per (type, user), for the per-user rate.
-- * jobs_user_ready_idx: runnable jobs by type, priority and user, for the claims that walk
--   users (fair share and limits per user): one index probe per user visited, never a read of
--   the whole backlog of a user who cannot run.
--
-- Types without a row never reach any of this: their claim is the same statement as before.
-- Jobs held back stay `queued`; the claim says when the next start is allowed, and the worker
-- leaves the type alone until then.

CREATE TABLE flow_limits (
    type             varchar(255) PRIMARY KEY,
    rate_max         integer  CHECK (rate_max >= 1),          -- starts per rate_period, fleet-wide
    rate_period      interval CHECK (rate_period > '0'),
    user_rate_max    integer  CHECK (user_rate_max >= 1),     -- starts per user_rate_period, per user
    user_rate_period interval CHECK (user_rate_period > '0'),
    user_max_running integer  CHECK (user_max_running >= 1),  -- jobs in progress per user
    fair_share       boolean      NOT NULL DEFAULT false,     -- round-robin across user_id
    starts           timestamptz[] NOT NULL DEFAULT '{}',     -- the last rate_max starts, oldest first
    fair_cursor      integer,                                 -- the user a fair claim served last
    updated_at       timestamptz  NOT NULL DEFAULT now(),
    CHECK ((rate_max IS NULL) = (rate_period IS NULL)),
    CHECK ((user_rate_max IS NULL) = (user_rate_period IS NULL))
);

CREATE TABLE flow_user_starts (
    type    varchar(255)  NOT NULL,
    user_id integer       NOT NULL,  -- 0 stands for jobs without a user
    starts  timestamptz[] NOT NULL,  -- the last user_rate_max starts of this user, oldest first
    PRIMARY KEY (type, user_id)
);

CREATE INDEX jobs_user_ready_idx ON jobs (type, priority DESC, (COALESCE(user_id, 0)), seq)
    WHERE status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL;

-- How many more starts a log allows now: at most `max_n` in any `period`.
CREATE FUNCTION jobdesk_rate_room(starts timestamptz[], max_n integer, period interval) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT max_n - count(*)::integer FROM unnest(starts) s WHERE s > now() - period
$$;

-- When a log allows `k` more starts (its next one, by default): NULL when it allows them now.
CREATE FUNCTION jobdesk_rate_next(starts timestamptz[], max_n integer, period interval, k integer DEFAULT 1)
RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT s + period FROM unnest(starts) s WHERE s > now() - period
     ORDER BY s DESC OFFSET max_n - LEAST(k, max_n) LIMIT 1
$$;

-- The log with `n` more starts now, kept to its last `max_n` entries, oldest first.
CREATE FUNCTION jobdesk_rate_log(starts timestamptz[], n integer, max_n integer) RETURNS timestamptz[]
LANGUAGE sql STABLE AS $$
    SELECT COALESCE(array_agg(s ORDER BY s), '{}') FROM (
        SELECT s FROM (SELECT unnest(starts) UNION ALL SELECT now() FROM generate_series(1, n)) AS x(s)
         ORDER BY s DESC LIMIT max_n) y
$$;

-- Jobs of a type in progress, per user (0: none), with a snapshot taken now; jobs the calling
-- statement completes (`done_ids`) are not counted.
CREATE FUNCTION jobdesk_user_running(job_type text, done_ids text[], done_attempts integer[]) RETURNS jsonb
LANGUAGE sql VOLATILE AS $$
    SELECT COALESCE(jsonb_object_agg(u, n), '{}') FROM (
        SELECT COALESCE(user_id, 0) AS u, count(*) AS n FROM jobs j
         WHERE status = 'in_progress' AND type = job_type
           AND (j.id, j.attempts) NOT IN (SELECT * FROM unnest(done_ids, done_attempts))
         GROUP BY 1) c
$$;

-- How many jobs of a user a claim may start now, before those it already took (`taken`).
CREATE FUNCTION jobdesk_user_room(f flow_limits, uid integer, running jsonb, taken integer) RETURNS integer
LANGUAGE plpgsql STABLE AS $$
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

-- The users with runnable jobs of a type at priority `prio`, by id: one index probe each.
CREATE FUNCTION jobdesk_ready_users(job_type text, prio integer) RETURNS integer[]
LANGUAGE sql STABLE AS $$
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

-- The next priority below `above` (NULL: the highest) with runnable jobs of a type.
CREATE FUNCTION jobdesk_ready_priority(job_type text, above integer) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT priority FROM jobs
     WHERE type = job_type AND (above IS NULL OR priority < above)
       AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL
     ORDER BY priority DESC, seq LIMIT 1
$$;

-- Up to `want` runnable jobs of a type at priority `prio`, the oldest of each user after `after`
-- in user order, one per user, except `skip` (jobs a claim already holds): one statement that
-- finds the users one index probe at a time. `users_seen`: how many users it looked at (fewer
-- than `want`: it reached the last user); `last_taken`: the last user it took a job from.
CREATE FUNCTION jobdesk_fair_turn(job_type text, prio integer, after integer, want integer, skip varchar[],
                                  OUT ids varchar[], OUT users_seen integer, OUT last_user integer,
                                  OUT last_taken integer)
LANGUAGE sql VOLATILE AS $$
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

-- Fair share without limits per user: turns of `jobdesk_fair_turn` from the user after the one
-- served last, round and round, until `room` jobs or a whole round took none.
CREATE FUNCTION jobdesk_flow_round_robin(f flow_limits, room integer) RETURNS varchar[]
LANGUAGE plpgsql VOLATILE AS $$
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

-- Fair share with limits per user: up to `room` runnable jobs of a type, round-robin across users
-- from the one after the user served last, one job per user per turn, oldest first within each
-- user, highest priority first. Users are found one index probe at a time from there, so a
-- claim costs a few probes per job whatever the number of users; users without room (their
-- limits) are passed by. Locks the jobs it returns.
CREATE FUNCTION jobdesk_flow_fair(f flow_limits, room integer, running jsonb) RETURNS varchar[]
LANGUAGE plpgsql VOLATILE AS $$
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

-- Limits per user, oldest first: up to `room` runnable jobs of a type, the oldest of the users
-- who have room, each user within theirs. Locks the jobs it returns.
CREATE FUNCTION jobdesk_flow_by_user(f flow_limits, room integer, running jsonb) RETURNS varchar[]
LANGUAGE plpgsql VOLATILE AS $$
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

-- The ids a claim of a flow-controlled type may take: at most `want`, within the type's
-- concurrency limit (type_limits, locked) and the worker's own cap (see jobdesk_type_room),
-- its rate, and its limits per user; in fair-share order or oldest first. Locks the type's
-- flow_limits row and the jobs it returns, and logs their starts. `next_at`: when the rate
-- allows `want` more starts, if the rate held jobs back (a worker then claims them in one go,
-- not one statement per start as each old start leaves the window); 'infinity' when runnable jobs are held by
-- a limit that a job's end lifts (concurrency, per user); NULL otherwise.
CREATE FUNCTION jobdesk_flow_pick(worker varchar, job_type text, want integer, own_cap integer,
                                  done_ids text[] DEFAULT '{}', done_attempts integer[] DEFAULT '{}',
                                  OUT ids varchar[], OUT next_at timestamptz)
LANGUAGE plpgsql VOLATILE AS $$
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

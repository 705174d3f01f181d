-- jobs_user_ready_idx (sql/022) only where per-user flow control needs it.
--
-- The index of runnable jobs by type, priority and user serves the claims that walk users (fair
-- share, limits per user), one probe per user visited. No other statement reads it, yet every
-- job enqueued paid for an entry in it: a fifth of the time of a bulk enqueue of no-op jobs
-- (benchmarks/enqueue_bench.py). It is dropped here, and made again at once for a database that
-- has a type with per-user flow control; otherwise the first worker that serves such a type
-- builds it with CREATE INDEX CONCURRENTLY (jobdesk.store.user_index), with the same definition.
DROP INDEX jobs_user_ready_idx;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM flow_limits
                WHERE fair_share OR user_max_running IS NOT NULL OR user_rate_max IS NOT NULL) THEN
        CREATE INDEX jobs_user_ready_idx ON jobs_live (type, priority DESC, (COALESCE(user_id, 0)), seq)
            WHERE status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL;
    END IF;
END $$;


WITH done AS (
    UPDATE jobs AS j
       SET status = 'completed', result_data = u.result::jsonb, completed_at = now(), updated_at = now(),
           error_message = NULL, error_fingerprint = NULL, next_retry_at = NULL, worker_id = NULL,
           retain_from = now()
      FROM unnest((SELECT $5::text[])::text[], (SELECT $6::text[])::text[], (SELECT $7::int[])::int[]) AS u(id, result, attempt)
     WHERE j.id = u.id AND j.worker_id = $1 AND j.attempts = u.attempt
       AND j.status = 'in_progress' AND j.is_active
    RETURNING j.id
), due AS (
    SELECT id, type, priority, seq FROM jobs
     WHERE status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NOT NULL AND run_at <= now()
     ORDER BY run_at LIMIT 1000
       FOR UPDATE SKIP LOCKED
), ready AS (
    SELECT r.id, c.priority, c.seq
      FROM (SELECT * FROM (
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[1]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($8::int[])[1]) AND seq >= (SELECT ($9::bigint[])[1]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[1]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($8::int[])[1]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
) walks ORDER BY priority DESC, seq) c
     CROSS JOIN LATERAL (SELECT id FROM jobs WHERE ctid = c.tid AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL
                           FOR UPDATE SKIP LOCKED) r
     LIMIT (SELECT $3::int)
), picked AS (
    SELECT id FROM (SELECT id, priority, seq FROM ready
                    UNION ALL
                    SELECT id, priority, seq FROM due WHERE type = ANY((SELECT $2::text[])::text[])) p
     ORDER BY priority DESC, seq LIMIT (SELECT $3::int)
), promoted AS (
    UPDATE jobs_live SET run_at = NULL
     WHERE id = ANY(ARRAY(SELECT id FROM due EXCEPT SELECT id FROM picked))
    RETURNING id
), told AS (
    SELECT count(pg_notify('jobdesk_new_jobs', '')) AS n FROM (SELECT FROM promoted LIMIT 1) p
), claimed AS (
    UPDATE jobs_live AS j
       SET status = 'in_progress', worker_id = $1, attempts = j.attempts + 1, run_at = NULL,
           started_at = now(), updated_at = now()
     WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND (SELECT n FROM told) >= 0
    RETURNING j.id, j.type, j.input_data, j.user_id, j.pipeline_id, j.retry_count, j.attempts,
              j.priority, j.seq, j.trace_context, extract(epoch FROM now() - GREATEST(j.created_at, j.next_retry_at, j.scheduled_at))::float8 AS waited_s
)
SELECT false AS claimed, d.id, NULL::varchar AS type, NULL::jsonb AS input_data, NULL::int AS user_id,
       NULL::varchar AS pipeline_id, 0 AS retry_count, 0 AS attempts, 0 AS priority, 0::bigint AS seq,
       NULL::jsonb AS trace_context, 0::float8 AS waited_s
  FROM done d
UNION ALL
SELECT true, c.id, c.type, c.input_data, c.user_id, c.pipeline_id, c.retry_count, c.attempts,
       c.priority, c.seq, c.trace_context, c.waited_s
  FROM claimed c

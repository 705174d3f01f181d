
WITH async_commit AS (
    SELECT set_config('synchronous_commit', 'off', true) AS setting
), due AS (
    SELECT id, type, priority, seq FROM jobs
     WHERE status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NOT NULL AND run_at <= now()
     ORDER BY run_at LIMIT 1000
       FOR UPDATE SKIP LOCKED
), ready AS (
    SELECT r.id, c.priority, c.seq
      FROM (SELECT * FROM (
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[1]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[1]) AND seq >= (SELECT ($6::bigint[])[1]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[1]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[1]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[2]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[2]) AND seq >= (SELECT ($6::bigint[])[2]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[2]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[2]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[3]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[3]) AND seq >= (SELECT ($6::bigint[])[3]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[3]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[3]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[4]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[4]) AND seq >= (SELECT ($6::bigint[])[4]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[4]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[4]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[5]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[5]) AND seq >= (SELECT ($6::bigint[])[5]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[5]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[5]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[6]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[6]) AND seq >= (SELECT ($6::bigint[])[6]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[6]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[6]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[7]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[7]) AND seq >= (SELECT ($6::bigint[])[7]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[7]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[7]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[8]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[8]) AND seq >= (SELECT ($6::bigint[])[8]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[8]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[8]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[9]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[9]) AND seq >= (SELECT ($6::bigint[])[9]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[9]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[9]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[10]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[10]) AND seq >= (SELECT ($6::bigint[])[10]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[10]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[10]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[11]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[11]) AND seq >= (SELECT ($6::bigint[])[11]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[11]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[11]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[12]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[12]) AND seq >= (SELECT ($6::bigint[])[12]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[12]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[12]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[13]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[13]) AND seq >= (SELECT ($6::bigint[])[13]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[13]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[13]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[14]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[14]) AND seq >= (SELECT ($6::bigint[])[14]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[14]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[14]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[15]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[15]) AND seq >= (SELECT ($6::bigint[])[15]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[15]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[15]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[16]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[16]) AND seq >= (SELECT ($6::bigint[])[16]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[16]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[16]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[17]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[17]) AND seq >= (SELECT ($6::bigint[])[17]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[17]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[17]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[18]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[18]) AND seq >= (SELECT ($6::bigint[])[18]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[18]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[18]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[19]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[19]) AND seq >= (SELECT ($6::bigint[])[19]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[19]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[19]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[20]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[20]) AND seq >= (SELECT ($6::bigint[])[20]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[20]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[20]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[21]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[21]) AND seq >= (SELECT ($6::bigint[])[21]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[21]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[21]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[22]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[22]) AND seq >= (SELECT ($6::bigint[])[22]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[22]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[22]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[23]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[23]) AND seq >= (SELECT ($6::bigint[])[23]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[23]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[23]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[24]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[24]) AND seq >= (SELECT ($6::bigint[])[24]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[24]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[24]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[25]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[25]) AND seq >= (SELECT ($6::bigint[])[25]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[25]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[25]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[26]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[26]) AND seq >= (SELECT ($6::bigint[])[26]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[26]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[26]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[27]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[27]) AND seq >= (SELECT ($6::bigint[])[27]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[27]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[27]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[28]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[28]) AND seq >= (SELECT ($6::bigint[])[28]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[28]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[28]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[29]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[29]) AND seq >= (SELECT ($6::bigint[])[29]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[29]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[29]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[30]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[30]) AND seq >= (SELECT ($6::bigint[])[30]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[30]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[30]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[31]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[31]) AND seq >= (SELECT ($6::bigint[])[31]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[31]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[31]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[32]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority = (SELECT ($5::int[])[32]) AND seq >= (SELECT ($6::bigint[])[32]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
  UNION ALL
  (SELECT ctid AS tid, priority, seq FROM jobs WHERE type = (SELECT ($2::text[])[32]) AND status = 'queued' AND pending_deps = 0 AND is_active AND run_at IS NULL AND priority < (SELECT ($5::int[])[32]) ORDER BY priority DESC, seq LIMIT (SELECT $4::int))
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
)
UPDATE jobs_live AS j
   SET status = 'in_progress', worker_id = $1, attempts = j.attempts + 1, run_at = NULL,
           started_at = now(), updated_at = now()
 WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND (SELECT setting FROM async_commit) = 'off'
   AND (SELECT n FROM told) >= 0
RETURNING true AS claimed, j.id, j.type, j.input_data, j.user_id, j.pipeline_id, j.retry_count, j.attempts,
              j.priority, j.seq, j.trace_context, extract(epoch FROM now() - GREATEST(j.created_at, j.next_retry_at, j.scheduled_at))::float8 AS waited_s

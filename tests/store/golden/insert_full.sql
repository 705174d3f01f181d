
INSERT INTO jobs_live (id, type, user_id, pipeline_id, input_data, dependent_on_jobs, priority, scheduled_at,
                  unique_key, trace_context)
SELECT id, type, COALESCE(user_id, $8), pipeline_id, input_data::jsonb, dependent_on_jobs::jsonb,
       priority, scheduled_at, unique_key, trace_context::jsonb
  FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::int[],
              $9::timestamptz[], $10::text[], $11::text[])
       WITH ORDINALITY AS t(id, type, user_id, pipeline_id, input_data, dependent_on_jobs,
                            priority, scheduled_at, unique_key, trace_context, ord) WHERE (SELECT set_config('jobdesk.fresh_ids', 'on', true)) = 'on'
 ORDER BY ord
ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND status IN ('queued', 'in_progress', 'waiting_approval') DO NOTHING
RETURNING id


INSERT INTO jobs_live (id, type, user_id, pipeline_id, input_data, dependent_on_jobs, priority)
SELECT id, type, COALESCE(user_id, $8), pipeline_id, input_data::jsonb, dependent_on_jobs::jsonb,
       priority
  FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::int[])
       WITH ORDINALITY AS t(id, type, user_id, pipeline_id, input_data, dependent_on_jobs,
                            priority, ord) WHERE (SELECT set_config('jobdesk.fresh_ids', 'on', true)) = 'on'
 ORDER BY ord

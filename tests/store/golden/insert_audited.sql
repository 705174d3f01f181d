
WITH later AS (
    SELECT set_config('jobdesk.notify_after_commit', 'on', true) AS setting
), ins AS (
INSERT INTO jobs_live (id, type, user_id, pipeline_id, input_data, dependent_on_jobs, priority, scheduled_at,
                  unique_key, trace_context)
SELECT id, type, COALESCE(user_id, $8), pipeline_id, input_data::jsonb, dependent_on_jobs::jsonb,
       priority, scheduled_at, unique_key, trace_context::jsonb
  FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::int[],
              $9::timestamptz[], $10::text[], $15::text[])
       WITH ORDINALITY AS t(id, type, user_id, pipeline_id, input_data, dependent_on_jobs,
                            priority, scheduled_at, unique_key, trace_context, ord) WHERE (SELECT set_config('jobdesk.fresh_ids', 'on', true)) = 'on'
 ORDER BY ord

RETURNING *

), audit AS (
    INSERT INTO audit_log (os_user, source, actor, action, job_ids)
    SELECT o, s, a, 'submit', string_to_array(i, ',')
      FROM unnest($11::text[], $12::text[], $13::text[], $14::text[]) AS t(o, s, a, i)
)
SELECT ins.id, to_jsonb(ins) AS job, ins.priority AS notice_priority, ins.seq AS notice_seq
  FROM ins WHERE (SELECT setting FROM later) = 'on'
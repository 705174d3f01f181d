
    UPDATE jobs AS j
       SET status = 'completed', result_data = u.result::jsonb, completed_at = now(), updated_at = now(),
           error_message = NULL, error_fingerprint = NULL, next_retry_at = NULL, worker_id = NULL,
           retain_from = now()
      FROM unnest($2::text[], $3::text[], $4::int[]) AS u(id, result, attempt)
     WHERE j.id = u.id AND j.worker_id = $1 AND j.attempts = u.attempt
       AND j.status = 'in_progress' AND j.is_active
    RETURNING j.id AS id, false AS claimed
-- jobdesk schema, part 4: list pipelines newest first without reading every job.
--
-- The console walks this index backwards to find each pipeline's first job (its "head"),
-- and stops after a screenful. Jobs outside pipelines are not in it, so plain jobs cost it
-- nothing; its key never changes after insert.

CREATE INDEX jobs_pipeline_recent_idx ON jobs (seq DESC) WHERE pipeline_id IS NOT NULL;

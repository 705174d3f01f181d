-- jobdesk schema, part 33: the jobs that started waiting for approval lately, through an index.
--
-- An open console tells its operator when jobs fail for good or start waiting for approval. It
-- asks for the jobs of those statuses changed since it last asked; failed ones come from
-- jobs_finished_idx (status, updated_at), and this index serves the waiting ones the same way.
-- Without it, each ask read every job waiting for approval, however few had changed.

CREATE INDEX jobs_waiting_approval_idx ON jobs (updated_at) WHERE status = 'waiting_approval';

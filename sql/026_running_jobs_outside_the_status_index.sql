-- Running jobs leave jobs_status_idx.
--
-- Every status change of a job is a new row version that enters each index whose predicate it
-- matches (a change of status is never a HOT update). jobs_status_idx (status, seq) is read only
-- by the job lists and counts of the console, the HTTP API and the CLI, yet every job entered it
-- three times: queued, in progress and finished. Its in-progress entries served one read, the
-- running jobs in enqueue order, and cost every claim an index insertion: about 3 µs of
-- PostgreSQL's CPU per job, 5 % of a claim and completion (benchmarks/index_cost_bench.py).
--
-- Running jobs are all in jobs_in_progress_worker_idx, which the claim writes anyway (the rescue
-- of a lost worker's jobs reads it). The lists read them from there and sort them; their number
-- is bounded by the workers' slots, not by the table.
DROP INDEX jobs_status_idx;
CREATE INDEX jobs_status_idx ON jobs (status, seq) WHERE status <> 'in_progress';

-- The index of inputs leaves out the jobs whose input is empty.
--
-- jobs_input_data_path_idx (sql/030) served the input search with an entry for every row version
-- of `jobs`: a GIN index enters a document without keys too (as an "empty item"), so a job with
-- `{}` as its input cost an insertion into the index at its insert, its claim and its completion,
-- while no search can ever find it (a search term names a path and a value, and `{}` contains
-- neither). A quarter of a bulk enqueue of such jobs went to the index. Partial now: a row enters
-- it only when its input has something in it. The search adds `input_data <> '{}'` to each term
-- (worker/store/jobs.py), which selects the same rows and lets the planner use this index.
DROP INDEX jobs_input_data_path_idx;
CREATE INDEX jobs_input_data_path_idx ON jobs USING gin (input_data jsonb_path_ops)
    WHERE input_data <> '{}'::jsonb;

-- A job found by the short id that `jobdesk jobs` and the console print: the last 8 characters
-- of its id (the random tail of a UUID; its head is a timestamp that every job of the same
-- minute shares). `right(id, 8) = $1` reads this index instead of every row of `jobs`; a longer
-- tail is checked against the rows it finds (jobdesk.store.job_ids).
--
-- A prefix of an id needs no index of its own: it is a range of the primary key.
CREATE INDEX jobs_id_tail_idx ON jobs (right(id, 8));

-- jobdesk schema, part 36: runs of a schedule asked for by an operator (`jobdesk schedule run`).
--
-- A run asked for now is a schedule_ticks row like a regular tick, so the schedule's recent runs
-- are read from one table, marked `manual`. Its tick is the time it was asked for. The primary
-- key takes `manual` in, so that a manual run never holds the key of a regular tick that falls at
-- the same instant: that tick still gets its job. The schedule's next_tick_at, last_tick_at and
-- last_job_id describe the regular ticks only, and a manual run leaves them alone.

ALTER TABLE schedule_ticks ADD COLUMN manual boolean NOT NULL DEFAULT false;
ALTER TABLE schedule_ticks DROP CONSTRAINT schedule_ticks_pkey;
ALTER TABLE schedule_ticks ADD PRIMARY KEY (schedule, tick_at, manual);

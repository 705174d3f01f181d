-- jobdesk schema, part 12: periodic jobs.
--
-- A schedule is a row; every worker fires due schedules, so there is no leader to lose. Each
-- tick's job is inserted in the same transaction as the tick's row in schedule_ticks, whose
-- primary key (schedule, tick) makes a second job for the same tick impossible, whatever the
-- number of workers and hosts, and across restarts.

CREATE TABLE schedules (
    name          text         PRIMARY KEY,
    cron          text,                                   -- a cron expression, in `timezone`
    every_s       double precision CHECK (every_s >= 1),   -- or an interval in seconds
    timezone      text         NOT NULL DEFAULT 'UTC',
    type          varchar(255) NOT NULL,
    input_data    jsonb        NOT NULL DEFAULT '{}',
    priority      integer      NOT NULL DEFAULT 0,
    misfire       text         NOT NULL DEFAULT 'skip' CHECK (misfire IN ('skip', 'once', 'all')),
    overlap       text         NOT NULL DEFAULT 'allow' CHECK (overlap IN ('allow', 'skip')),
    paused        boolean      NOT NULL DEFAULT false,
    next_tick_at  timestamptz  NOT NULL,                  -- the first tick not handled yet
    last_tick_at  timestamptz,                            -- the last tick handled
    last_job_id   varchar(36),                            -- the job of the last tick that made one
    source        text         NOT NULL DEFAULT 'cli',    -- cli, api, or the processor module that declared it
    created_at    timestamptz  NOT NULL DEFAULT now(),
    updated_at    timestamptz  NOT NULL DEFAULT now(),
    CONSTRAINT schedules_one_rule CHECK ((cron IS NULL) <> (every_s IS NULL)),
    CONSTRAINT schedules_input_is_object CHECK (jsonb_typeof(input_data) = 'object')
);
CREATE INDEX schedules_due_idx ON schedules (next_tick_at) WHERE NOT paused;

CREATE TABLE schedule_ticks (
    schedule  text        NOT NULL REFERENCES schedules (name) ON DELETE CASCADE,
    tick_at   timestamptz NOT NULL,
    job_id    varchar(36),             -- NULL: skipped (the previous job was still unfinished)
    fired_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schedule, tick_at)
);
CREATE INDEX schedule_ticks_job_idx ON schedule_ticks (job_id) WHERE job_id IS NOT NULL;

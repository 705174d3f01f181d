-- jobdesk schema, part 2: worker registry, heartbeats and the control channel.

CREATE TABLE workers (
    id               varchar(64)  PRIMARY KEY,
    host             text         NOT NULL,
    pid              integer      NOT NULL,
    started_at       timestamptz  NOT NULL DEFAULT now(),
    heartbeat_at     timestamptz  NOT NULL DEFAULT now(),
    concurrency      integer      NOT NULL,
    job_types        text[]       NOT NULL DEFAULT '{}',
    version          text         NOT NULL,
    -- running, paused, draining, stopped; lost once another worker finds its heartbeat stale.
    state            varchar(16)  NOT NULL DEFAULT 'running',
    -- What an operator asked for (pause, resume, drain, stop); the worker acts on it and clears it.
    requested        varchar(16),
    stopped_at       timestamptz,
    CONSTRAINT workers_state_check CHECK (state IN ('running', 'paused', 'draining', 'stopped', 'lost')),
    CONSTRAINT workers_requested_check CHECK (requested IN ('pause', 'resume', 'drain', 'stop'))
);
CREATE INDEX workers_live_idx ON workers (heartbeat_at) WHERE state IN ('running', 'paused', 'draining');

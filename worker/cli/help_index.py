"""What `jobdesk --help` lists: written by `python -m jobdesk.cli.front --write` from the full
parser (do not edit by hand). CHECKSUM is that of the modules the text came from."""

CHECKSUM: int | None = 114971533
COMMANDS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ('migrate', (), 'apply the schema migrations'),
    ('db', (), 'the embedded PostgreSQL: run it in the foreground, or `db status`, `db stop`'),
    ('worker', (), 'run a worker'),
    ('demo', (), "enqueue the demo 'generate video' pipeline"),
    ('submit', (), 'enqueue a job'),
    ('jobs', (), 'list jobs, newest first'),
    ('show', (), 'show one job with its attempt history'),
    ('cancel', (), 'cancel jobs and their dependants'),
    ('retry', (), 'put failed or cancelled jobs back in the queue'),
    ('approve', (), 'approve jobs waiting for approval'),
    ('reject', (), 'reject jobs waiting for approval'),
    ('logs', (), "print the log lines a job's processor emitted"),
    ('stack', (), "print a running job's current Python stack (after it ended, the last one taken)"),
    ('export', (), 'write every column of the jobs matching the filter to stdout, id first'),
    ('open', (), 'open the console on one job (an id that does not exist opens nothing)'),
    ('workers', (), 'list workers and what they run'),
    ('pipelines', (), 'list pipelines, newest first, with progress'),
    ('cancel-pipeline', (), 'cancel every unfinished job of a pipeline'),
    ('prune', (), 'delete finished jobs past their retention now'),
    ('stats', (), 'throughput, queue depth and wait/run times'),
    ('worker-ctl', (), 'pause, resume, drain or stop a worker'),
    ('api', (), 'serve the HTTP API'),
    ('token', (), "manage the HTTP API's tokens"),
    ('schedule', (), 'periodic jobs: add, list, pause, resume, remove, run now'),
    ('types', (), 'job types: paused or not, their limits and rates; pause, resume, set limits'),
    ('event', (), 'emit an event that durable jobs wait for'),
    ('doctor', (), "check the database: each host's role, standby lag, schema, workers"),
    ('grant', (), 'make a PostgreSQL role a viewer (read-only) or an operator of jobdesk'),
)

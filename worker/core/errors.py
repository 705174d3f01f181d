"""Expected failures of jobdesk. Each is shown to the user as one readable line."""

from __future__ import annotations


class JobdeskError(Exception):
    """Base of every expected jobdesk failure; `str()` is a message for the user."""


class SettingsError(JobdeskError):
    """A setting from the environment or `.env` is malformed."""


class DatabaseUnavailable(JobdeskError):
    """PostgreSQL cannot be reached, refused the connection, or was lost before a write was
    confirmed. For an enqueue, the message says whether the job was not written or may or may
    not have been: then a retry is safe for a job with a unique key or an idempotency key."""


class EmbeddedDatabaseError(JobdeskError):
    """The embedded PostgreSQL could not be set up or started."""


class JobNotFound(JobdeskError):
    """An id names no job."""


class IllegalTransition(JobdeskError):
    """The action is not legal for the status a job is in; nothing was changed."""


class InvalidJob(JobdeskError):
    """An enqueue was refused: bad input, an unknown dependency or a cycle.

    `job_id` and `field` say where, when known, so the HTTP API can name the field's path."""

    def __init__(self, message: str, *, job_id: str | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.field = field


class ProcessorLoadError(JobdeskError):
    """A processor module could not be imported or has no usable PROCESSOR_MAP."""


class PermanentJobError(Exception):
    """Raised by a processor to fail its job at once, without retries."""


class JobWaitTimeout(JobdeskError, TimeoutError):
    """A wait for jobs ended before they did; `statuses` maps each job not done to its status then.

    Also a TimeoutError, so `except TimeoutError` catches it as it catches asyncio's own."""

    def __init__(self, message: str, statuses: dict[str, str]) -> None:
        super().__init__(message)
        self.statuses = statuses


class NoJobResult(JobdeskError):
    """A job's result was asked for, but the job has none: it has not completed (it failed, was
    cancelled, or has not finished yet)."""


class EventTimeout(JobdeskError, TimeoutError):
    """`job.wait_for_event` timed out before its event was emitted. A processor may catch it.

    Also a TimeoutError, so `except TimeoutError` catches it too."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


class StepError(JobdeskError):
    """A durable step was misused: its name used twice in one run, reserved, or its result not JSON."""


class DurableUnavailable(JobdeskError):
    """A durable call (`job.step`, `job.sleep`...) was made on a job that no worker runs, such as
    one a test built by hand: there is no database to keep its steps in."""


class JobTimedOut(JobdeskError):
    """A run passed its time limit (a processor's `timeout`, JOB_TYPE_TIMEOUTS or JOB_TIMEOUT).
    Its message alone is the attempt's error, `timed out after 30 s`, and the job is retried as
    after any other error."""


class ReadOnlyRole(JobdeskError):
    """The database role of this connection cannot change jobs (a viewer, `jobdesk grant viewer`):
    an action was refused before it changed anything. Its message is the whole line."""

    def __init__(self, role: str) -> None:
        super().__init__(f"read-only: role {role} cannot change jobs")
        self.role = role


class MissingGrant(JobdeskError):
    """The role can change jobs but was refused another table, most likely one a later migration
    added after its grants: nothing was changed, and the message says how to grant it."""


class AmbiguousJobId(JobdeskError):
    """A part of an id that more than one job's id starts or ends with; nothing was done."""


class JobNotRunning(JobdeskError):
    """A running job's stack was asked for, but the job is not running and no stack of it was kept."""


class WorkerNotAnswering(JobdeskError):
    """The worker running a job did not answer a request for its stack in time; `worker_id` names it."""

    def __init__(self, message: str, worker_id: str) -> None:
        super().__init__(message)
        self.worker_id = worker_id

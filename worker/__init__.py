"""jobdesk's engine: the job model, the processor API, the worker and the backend client.

The public Python API is what `__all__` names, importable from here:

- the backend clients: `JobClient` (enqueue, read, wait for and act on jobs) and `SyncJobClient`
  (the same, as plain calls, for code without an event loop);
- the processor API: `BaseProcessor` (an `async def process`, given a `Job`) and
  `SyncProcessor` (a plain `def process`, given a `SyncJob`), `ProcessorResult`, `JobCreate`,
  `Schedule`, `PermanentJobError`;
- the models a client reads: `JobRecord`, `Status`;
- the errors it may raise: `JobdeskError` (the base of them all), `JobNotFound`, `InvalidJob`,
  `IllegalTransition`, `JobWaitTimeout`, `NoJobResult`, `DatabaseUnavailable` (the database
  cannot be reached, or was lost before a write was confirmed); and a durable processor's:
  `EventTimeout` (`job.wait_for_event` timed out), `StepError` (a step misused);
- `__version__`.

    from jobdesk import BaseProcessor, Job, JobClient, JobCreate, PermanentJobError, ProcessorResult, SyncJobClient

The package ships a `py.typed` marker: type checkers read these names' types from it.

The console is `jobdesk.console`. Everything else, the subpackages (`jobdesk.core`, `jobdesk.store`, `jobdesk.runtime`,
`jobdesk.service`, `jobdesk.api`, `jobdesk.cli`, ...) included, is internal: it may change from one
release to the next.

In a checkout this package's folder is `worker/` (and the console's `desktop/`); `jobdesk` is the
only name it is imported by, there as from a wheel.
"""

if __name__ != "jobdesk":  # the checkout's folder imported by its old name
    raise ImportError(f"jobdesk is imported as `jobdesk`, not `{__name__}`: write `from jobdesk import ...` "
                      "(the old names `worker` and `desktop` were dropped in 0.2.0; see the changelog)")

from typing import TYPE_CHECKING

from jobdesk.core.version import __version__

if TYPE_CHECKING:  # what the names below are, for type checkers; at run time each loads when first used
    from jobdesk.core.errors import (
        DatabaseUnavailable,
        EventTimeout,
        IllegalTransition,
        InvalidJob,
        JobdeskError,
        JobNotFound,
        JobWaitTimeout,
        NoJobResult,
        PermanentJobError,
        StepError,
    )
    from jobdesk.core.models import Job, JobCreate, JobRecord, ProcessorResult, Status
    from jobdesk.core.processor import BaseProcessor, SyncProcessor
    from jobdesk.core.schedules import Schedule
    from jobdesk.core.sync_job import SyncJob
    from jobdesk.service.client import JobClient
    from jobdesk.service.sync_client import SyncJobClient

# Where each public name lives. They are loaded on first use (PEP 562), not by `import jobdesk`:
# a command such as `jobdesk worker` then loads only the modules it runs, and starts sooner.
_EXPORTS = {
    **dict.fromkeys(("DatabaseUnavailable", "EventTimeout", "IllegalTransition", "InvalidJob", "JobdeskError",
                     "JobNotFound", "JobWaitTimeout", "NoJobResult", "PermanentJobError", "StepError"),
                    "jobdesk.core.errors"),
    **dict.fromkeys(("Job", "JobCreate", "JobRecord", "ProcessorResult", "Status"), "jobdesk.core.models"),
    **dict.fromkeys(("BaseProcessor", "SyncProcessor"), "jobdesk.core.processor"),
    "SyncJob": "jobdesk.core.sync_job",
    "Schedule": "jobdesk.core.schedules",
    "JobClient": "jobdesk.service.client",
    "SyncJobClient": "jobdesk.service.sync_client",
}

__all__ = [
    # the backend clients
    "JobClient", "SyncJobClient",
    # the processor API
    "BaseProcessor", "Job", "JobCreate", "PermanentJobError", "ProcessorResult", "Schedule", "SyncJob",
    "SyncProcessor",
    # what a client reads
    "JobRecord", "Status",
    # errors
    "DatabaseUnavailable", "IllegalTransition", "InvalidJob", "JobNotFound", "JobWaitTimeout", "JobdeskError",
    "NoJobResult", "EventTimeout", "StepError",
    "__version__",
]


def __getattr__(name: str) -> object:
    from jobdesk.core.lazy import load_export

    return load_export(globals(), _EXPORTS, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})

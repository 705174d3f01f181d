"""jobdesk's engine: the job model, the processor API, the worker and the backend client.

The public Python API is what `__all__` names, importable from here:

- the backend client: `JobClient` (enqueue, read, wait for and act on jobs);
- the processor API: `BaseProcessor`, `Job`, `ProcessorResult`, `JobCreate`, `Schedule`,
  `PermanentJobError`;
- the models a client reads: `JobRecord`, `Status`;
- the errors it may raise: `JobdeskError` (the base of them all), `JobNotFound`, `InvalidJob`,
  `IllegalTransition`, `JobWaitTimeout`, `NoJobResult`, `DatabaseUnavailable` (the database
  cannot be reached, or was lost before a write was confirmed); and a durable processor's:
  `EventTimeout` (`job.wait_for_event` timed out), `StepError` (a step misused);
- `__version__`.

    from worker import BaseProcessor, Job, JobClient, JobCreate, PermanentJobError, ProcessorResult

Everything else, the subpackages (`worker.core`, `worker.store`, `worker.runtime`,
`worker.service`, `worker.api`, `worker.cli`, ...) included, is internal: it may change from one
release to the next.
"""

from worker.core.errors import (
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
from worker.core.models import Job, JobCreate, JobRecord, ProcessorResult, Status
from worker.core.processor import BaseProcessor
from worker.core.schedules import Schedule
from worker.core.version import __version__
from worker.service.client import JobClient

__all__ = [
    # the backend client
    "JobClient",
    # the processor API
    "BaseProcessor", "Job", "JobCreate", "PermanentJobError", "ProcessorResult", "Schedule",
    # what a client reads
    "JobRecord", "Status",
    # errors
    "DatabaseUnavailable", "IllegalTransition", "InvalidJob", "JobNotFound", "JobWaitTimeout", "JobdeskError",
    "NoJobResult", "EventTimeout", "StepError",
    "__version__",
]

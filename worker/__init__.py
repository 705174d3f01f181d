"""jobdesk's engine: the job model, the processor API, the worker and the backend client.

Processors import what they need from here:

    from worker import BaseProcessor, ProcessorResult, JobCreate, PermanentJobError
"""

from worker.core.errors import IllegalTransition, InvalidJob, JobdeskError, JobNotFound, PermanentJobError
from worker.core.models import Job, JobCreate, JobRecord, ProcessorResult, Status
from worker.core.processor import BaseProcessor
from worker.core.schedules import Schedule
from worker.service.client import JobClient

__version__ = "0.1.0"

__all__ = [
    "BaseProcessor", "IllegalTransition", "InvalidJob", "Job", "JobClient", "JobCreate",
    "JobNotFound", "JobRecord", "JobdeskError", "PermanentJobError", "ProcessorResult", "Schedule", "Status",
    "__version__",
]

"""The processor API: subclass BaseProcessor (an `async def process`) or SyncProcessor (a plain
`def process`), and map job types to the classes in PROCESSOR_MAP."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, ClassVar, Literal, TypeAlias, get_args

from jobdesk.core.models import Job, ProcessorResult

if TYPE_CHECKING:
    from pydantic import BaseModel  # for the annotations: the worker's first claim needs no pydantic

    from jobdesk.core.sync_job import SyncJob

Executor = Literal["async", "thread", "process"]
EXECUTORS: tuple[str, ...] = get_args(Executor)
SyncExecutor = Literal["thread", "process"]
SYNC_EXECUTORS: tuple[str, ...] = get_args(SyncExecutor)


class ProcessorSettings:
    """The class settings that BaseProcessor and SyncProcessor share. A processor is instantiated
    with no arguments, once per worker.

    `input_model`, a pydantic model, declares what `input_data` must look like: the worker checks
    it before `process` (a mismatch fails the job at once, without retries), and `jobdesk submit`
    and the HTTP API check it at enqueue time when they have the processor loaded.

    `output_model`, a pydantic model, declares what `result_data` must look like: the worker
    checks it after `process` returns, and a mismatch is a failed attempt, retried as any error
    (a bug that a new version of the processor may fix). A backend reads the result back typed
    with `JobRecord.result(model)`.

    `executor` says where `process` runs: "async" (on the worker's event loop), "thread" (a
    thread of its own, so that blocking code stalls no other job) or "process" (a separate
    process, for CPU-bound work; the class must then be importable by its module path).

    `timeout`, in seconds, limits each run; JOB_TYPE_TIMEOUTS overrides it by type, and
    JOB_TIMEOUT applies to types that set neither. A run past it fails its attempt with
    `timed out after N s`, retried as any other error.
    """

    input_model: ClassVar[type[BaseModel] | None] = None
    output_model: ClassVar[type[BaseModel] | None] = None
    executor: ClassVar[Executor | None] = None
    timeout: ClassVar[float | None] = None


class BaseProcessor(ProcessorSettings):
    """Runs one type of job with an `async def process`, on the worker's event loop unless
    `executor` says otherwise (see ProcessorSettings for the class settings).

    For blocking code, subclass SyncProcessor instead: its plain `def process` gets a SyncJob,
    whose methods are plain calls. (A plain `def process` here still runs, in a thread, as it
    always has; SyncProcessor is the typed way to write one.)
    """

    async def process(self, job: Job) -> ProcessorResult:
        raise NotImplementedError(f"{type(self).__name__}.process is not implemented")


class SyncProcessor(ProcessorSettings):
    """Runs one type of job with a plain `def process`, given a SyncJob: the same data and the
    same methods as a Job (`step`, `progress`, `log`, `cancelled`...), called without `await`.

    `executor` is "thread" (the default: a thread of the worker's own) or "process" (a separate
    process). "async" is refused when the worker loads the processor: an `async def process`
    belongs in a BaseProcessor. The other class settings are BaseProcessor's.
    """

    executor: ClassVar[SyncExecutor | None] = None

    def process(self, job: SyncJob) -> ProcessorResult:
        raise NotImplementedError(f"{type(self).__name__}.process is not implemented")


AnyProcessor: TypeAlias = BaseProcessor | SyncProcessor  # what PROCESSOR_MAP's classes make
PROCESSOR_BASES = (BaseProcessor, SyncProcessor)


def executor_of(processor: AnyProcessor | type[AnyProcessor]) -> Executor:
    """Where a processor's `process` runs: its `executor`, or by default "async" for an `async
    def` and "thread" for a plain `def` (a SyncProcessor's always). ValueError for an executor
    that is none of the three, and for a SyncProcessor told "async" or given an `async def`."""
    chosen = processor.executor
    name = processor.__name__ if isinstance(processor, type) else type(processor).__name__
    is_async = inspect.iscoroutinefunction(processor.process)
    if isinstance(processor, SyncProcessor) or (isinstance(processor, type) and issubclass(processor, SyncProcessor)):
        if is_async:
            raise ValueError(f"{name}.process is an async def: a SyncProcessor's process is a plain def; "
                             "subclass BaseProcessor for an async def")
        if chosen == "async":
            raise ValueError(f"{name}.executor is 'async': a SyncProcessor runs in a thread or a process "
                             "('thread', the default, or 'process'); subclass BaseProcessor for an async def")
        if chosen is not None and chosen not in SYNC_EXECUTORS:
            raise ValueError(f"{name}.executor is {chosen!r}; use one of {', '.join(map(repr, SYNC_EXECUTORS))}")
        return chosen or "thread"
    if chosen is None:
        return "async" if is_async else "thread"
    if chosen not in EXECUTORS:
        raise ValueError(f"{name}.executor is {chosen!r}; use one of {', '.join(map(repr, EXECUTORS))}")
    return chosen


def seconds_text(seconds: float) -> str:
    """`30 s`, `0.5 s`: a time limit as settings and messages write it."""
    return f"{seconds:.3f}".rstrip("0").rstrip(".") + " s"


def timeout_text(seconds: float) -> str:
    """`timed out after 30 s`, `timed out after 0.5 s`: the attempt error of a run past its limit."""
    return f"timed out after {seconds_text(seconds)}"

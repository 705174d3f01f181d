"""The processor API: subclass BaseProcessor and map job types to it in PROCESSOR_MAP."""

from __future__ import annotations

import inspect
from typing import ClassVar, Literal, get_args

from pydantic import BaseModel

from jobdesk.core.models import Job, ProcessorResult

Executor = Literal["async", "thread", "process"]
EXECUTORS: tuple[str, ...] = get_args(Executor)


class BaseProcessor:
    """Runs one type of job. Instantiated with no arguments, once per worker.

    `input_model`, a pydantic model, declares what `input_data` must look like: the worker checks
    it before `process` (a mismatch fails the job at once, without retries), and `jobdesk submit`
    and the HTTP API check it at enqueue time when they have the processor loaded.

    `output_model`, a pydantic model, declares what `result_data` must look like: the worker
    checks it after `process` returns, and a mismatch is a failed attempt, retried as any error
    (a bug that a new version of the processor may fix). A backend reads the result back typed
    with `JobRecord.result(model)`.

    `process` may be an `async def`, run on the worker's event loop, or a plain `def`, run in a
    thread of its own so that blocking code stalls no other job. `executor` says so explicitly:
    "async", "thread", or "process" (a separate process, for CPU-bound work; the class must then
    be importable by its module path). Unset, it follows from `process` (docs/processors.md).

    `timeout`, in seconds, limits each run; JOB_TYPE_TIMEOUTS overrides it by type, and
    JOB_TIMEOUT applies to types that set neither. A run past it fails its attempt with
    `timed out after N s`, retried as any other error.
    """

    input_model: ClassVar[type[BaseModel] | None] = None
    output_model: ClassVar[type[BaseModel] | None] = None
    executor: ClassVar[Executor | None] = None
    timeout: ClassVar[float | None] = None

    async def process(self, job: Job) -> ProcessorResult:
        raise NotImplementedError(f"{type(self).__name__}.process is not implemented")


def executor_of(processor: BaseProcessor | type[BaseProcessor]) -> Executor:
    """Where a processor's `process` runs: its `executor`, or "async" for an `async def` and
    "thread" for a plain `def`. ValueError for an executor that is none of the three."""
    chosen = processor.executor
    if chosen is None:
        return "async" if inspect.iscoroutinefunction(processor.process) else "thread"
    if chosen not in EXECUTORS:
        name = processor.__name__ if isinstance(processor, type) else type(processor).__name__
        raise ValueError(f"{name}.executor is {chosen!r}; use one of {', '.join(map(repr, EXECUTORS))}")
    return chosen


def seconds_text(seconds: float) -> str:
    """`30 s`, `0.5 s`: a time limit as settings and messages write it."""
    return f"{seconds:.3f}".rstrip("0").rstrip(".") + " s"


def timeout_text(seconds: float) -> str:
    """`timed out after 30 s`, `timed out after 0.5 s`: the attempt error of a run past its limit."""
    return f"timed out after {seconds_text(seconds)}"

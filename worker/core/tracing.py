"""OpenTelemetry traces of enqueues, runs and durable steps (docs/observability.md).

Tracing is on once the application has set a tracer provider (its own code, `opentelemetry-instrument`,
or `jobdesk worker` and `jobdesk api` from the OTEL_* variables, see `jobdesk.observe.otel_setup`).
Until then it costs one dictionary look-up per enqueue and per run (and a read of OpenTelemetry's
global provider where its API is imported, as FastAPI imports it): this module never imports
OpenTelemetry itself, it only looks in `sys.modules` for the API the application has imported,
so `import jobdesk` and a worker without the `otel` extra load none of it
(benchmarks/tracing_bench.py measures these costs).

Spans: `jobdesk.enqueue` (a producer), `jobdesk.run` (a consumer, one per attempt) and one span per
durable step, with OpenTelemetry's messaging attributes. The W3C trace context of the span that
enqueued a job is stored with it (`jobs.trace_context`); each run of the job is its child, so a
web request's trace goes on into its jobs, their child jobs and their pipelines' next stages.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jobdesk.core.version import __version__

if TYPE_CHECKING:
    from jobdesk.core.models import Job, JobCreate

SYSTEM = "jobdesk"
_API = "opentelemetry.trace"
_NULL = contextlib.nullcontext()
_UNREAD = object()

_provider: Any = None  # the tracer provider last seen
_tracer: Any = None  # its tracer, None while it is OpenTelemetry's default (no-op) one
_api: Any = None  # the module opentelemetry.trace
_propagator: Any = None  # W3C trace context


def enabled() -> bool:
    """Whether spans are recorded: a tracer provider other than OpenTelemetry's default no-op
    one is set (by `trace.set_tracer_provider`). Cheap enough for every job: a look-up in
    `sys.modules` while OpenTelemetry is not imported, then a read of its global provider."""
    api = sys.modules.get(_API)
    if api is None:
        return False
    # The global as set_tracer_provider keeps it: get_tracer_provider() reads the environment
    # each time while none is set, a microsecond per job where FastAPI has imported the API.
    provider = getattr(api, "_TRACER_PROVIDER", _UNREAD)
    if provider is None:
        return False
    if provider is _UNREAD:  # another layout of the API than the one pinned: its public call
        provider = api.get_tracer_provider()
    if provider is not _provider:
        _start(api, provider)
    return _tracer is not None


def _start(api: Any, provider: Any) -> None:  # noqa: ANN401 - opentelemetry.trace and its provider
    global _provider, _tracer, _api, _propagator
    _provider, _tracer = provider, None
    if isinstance(provider, api.ProxyTracerProvider | api.NoOpTracerProvider):
        return
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    _propagator = TraceContextTextMapPropagator()
    _api = api
    _tracer = provider.get_tracer("jobdesk", __version__)


def current_context() -> dict[str, str] | None:
    """The W3C trace context of the current span ({"traceparent": ..., "tracestate": ...}), or
    None without tracing or outside a span."""
    if not enabled():
        return None
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier or None


def _messaging(operation: str, job_type: str | None, job_id: str | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {"messaging.system": SYSTEM, "messaging.operation.type": operation}
    if job_type is not None:
        attributes["messaging.destination.name"] = job_type
    if job_id is not None:
        attributes["messaging.message.id"] = job_id
    return attributes


def enqueueing(jobs: Sequence[JobCreate],
               incoming: Callable[[], Mapping[str, str]] | None = None) -> contextlib.AbstractContextManager[None]:
    """Around an enqueue: a `jobdesk.enqueue` span whose trace context each job takes (see
    `carry`). Nothing without tracing, nor when every job has its trace context already (an
    enqueue span around this one, such as the API route's, or a job's run, gave it).

    `incoming`: the headers of the HTTP request that enqueues, whose `traceparent` is the
    span's parent when no span is current (an API that no instrumentation has wrapped)."""
    if not enabled() or all(job.trace_context is not None for job in jobs):
        return _NULL
    return _enqueue_span(jobs, incoming)


@contextlib.contextmanager
def _enqueue_span(jobs: Sequence[JobCreate], incoming: Callable[[], Mapping[str, str]] | None) -> Iterator[None]:
    types = {job.type for job in jobs}
    attributes = _messaging("create", next(iter(types)) if len(types) == 1 else None,
                            jobs[0].id if len(jobs) == 1 else None)
    if len(jobs) == 1:
        attributes.update({"jobdesk.job.id": jobs[0].id, "jobdesk.job.type": jobs[0].type})
    else:
        attributes["messaging.batch.message_count"] = len(jobs)
    parent = None
    if incoming is not None and not _api.get_current_span().get_span_context().is_valid:
        parent = _propagator.extract(incoming())
    with _tracer.start_as_current_span("jobdesk.enqueue", context=parent, kind=_api.SpanKind.PRODUCER,
                                       attributes=attributes):
        carry(jobs)
        yield


def carry(jobs: Sequence[JobCreate]) -> None:
    """Give the jobs without a trace context that of the current span (a job that a running
    job creates continues its run's trace)."""
    context = current_context()
    if context is None:
        return
    for job in jobs:
        if job.trace_context is None:
            job.trace_context = dict(context)


class RunSpan:
    """The `jobdesk.run` span of one attempt, current while the processor runs (log records and
    spans made meanwhile belong to it). Its parent is the context the job was enqueued in."""

    def __init__(self, job: Job) -> None:
        parent = _propagator.extract(job.trace_context) if job.trace_context else None
        attributes = _messaging("process", job.type, job.id)
        attributes.update({"jobdesk.job.id": job.id, "jobdesk.job.type": job.type,
                           "jobdesk.job.attempt": job.attempt})
        self.span = _tracer.start_span("jobdesk.run", context=parent, kind=_api.SpanKind.CONSUMER,
                                       attributes=attributes)

    @contextlib.contextmanager
    def current(self) -> Iterator[None]:
        """The span as the current one; exceptions go through untouched (see `failed`)."""
        with _api.use_span(self.span, record_exception=False, set_status_on_exception=False):
            yield

    def failed(self, exc: BaseException) -> None:
        """The attempt raised: the exception recorded, the status ERROR."""
        self.span.record_exception(exc)
        self.span.set_status(_api.Status(_api.StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))

    def end(self, status: str) -> None:
        """End the span with the status the attempt left the job in."""
        self.span.set_attribute("jobdesk.job.status", status)
        self.span.end()


def run_span(job: Job) -> RunSpan | None:
    """The span of a job's attempt, started; None without tracing."""
    return RunSpan(job) if enabled() else None


def step_span(job: Job, name: str, replayed: bool) -> contextlib.AbstractContextManager[object]:
    """A durable step's span, a child of the run's: an exception raised in it is recorded and
    sets ERROR. `replayed`: its result was stored by an earlier run, and `fn` is not called."""
    if not enabled():
        return _NULL
    attributes = _messaging("process", job.type, job.id)
    attributes.update({"jobdesk.job.id": job.id, "jobdesk.step.name": name, "jobdesk.step.replayed": replayed})
    return _tracer.start_as_current_span("jobdesk.step", kind=_api.SpanKind.INTERNAL, attributes=attributes)

"""The SDK's in-memory exporter as a fixture: tracing on for one test, as an application that
sets a tracer provider has it. A provider already set (by another test module) is shared; one
this fixture set is removed afterwards, so the tests after it run with tracing off again."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once


def _unset_provider() -> None:
    """Back to no tracer provider set (what OpenTelemetry's own tests do between tests)."""
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    current = trace.get_tracer_provider()
    ours = not isinstance(current, TracerProvider)
    provider = TracerProvider() if ours else current
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    if ours:
        trace.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        exporter.shutdown()
        if ours:
            provider.shutdown()
            _unset_provider()


def named(finished: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in finished if s.name == name]


def of_job(finished: Sequence[ReadableSpan], name: str, job_id: str) -> list[ReadableSpan]:
    """The spans `name` of one job, in the order they ended."""
    return [s for s in finished if s.name == name and (s.attributes or {}).get("jobdesk.job.id") == job_id]


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None

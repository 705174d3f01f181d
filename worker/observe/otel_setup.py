"""The OpenTelemetry SDK set up from the standard OTEL_* variables, for `jobdesk worker` and
`jobdesk api` (docs/observability.md).

Only when OTEL_TRACES_EXPORTER names an exporter: then a tracer provider with the resource of
OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, and a batch span processor per exporter (`otlp`,
over HTTP to OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; `console`, to
standard output). Without the variable nothing is imported, and the tracer provider that the
application or `opentelemetry-instrument` set, if any, is the one used. A provider already set
is never replaced.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from jobdesk.core.errors import JobdeskError

EXPORTERS = ("otlp", "console", "none")
DEFAULT_SERVICE_NAME = "jobdesk"


def _exporter(name: str) -> Any:  # noqa: ANN401 - a SpanExporter of the SDK
    if name == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()  # its endpoint, headers and timeout from the OTEL_EXPORTER_OTLP_* variables
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    return ConsoleSpanExporter()


def _names(value: str) -> list[str]:
    names = [n.strip().lower() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in EXPORTERS]
    if unknown:
        raise JobdeskError(f"OTEL_TRACES_EXPORTER: unknown exporter {unknown[0]!r}; "
                           f"use {', '.join(EXPORTERS)} (comma-separated)")
    return [n for n in names if n != "none"]


def configure_from_env(service_name: str = DEFAULT_SERVICE_NAME) -> Callable[[], None]:
    """Set the SDK up when OTEL_TRACES_EXPORTER asks for it; a call that flushes and shuts down
    what was set up (nothing otherwise), for the end of the process. `service_name` is the
    resource's service.name when OTEL_SERVICE_NAME does not give one."""
    names = _names(os.environ.get("OTEL_TRACES_EXPORTER", ""))
    if not names:
        return lambda: None
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise JobdeskError("OTEL_TRACES_EXPORTER is set, but OpenTelemetry is not installed: "
                           "pip install 'jobdesk[otel]'") from None
    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return lambda: None  # opentelemetry-instrument or the application set one: theirs
    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    defaults = {} if named else {SERVICE_NAME: service_name}
    provider = TracerProvider(resource=Resource.create(defaults))
    for name in names:
        provider.add_span_processor(BatchSpanProcessor(_exporter(name)))
    trace.set_tracer_provider(provider)
    return provider.shutdown

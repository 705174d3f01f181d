"""The current OpenTelemetry span's ids, for the log lines of a run: read without importing
OpenTelemetry (an application that never loaded it pays one dictionary look-up)."""

from __future__ import annotations

import sys


def current_trace_ids() -> tuple[str | None, str | None]:
    """The current span's trace and span ids, as hex, when OpenTelemetry is loaded and a span is
    recording; (None, None) otherwise."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None, None
    try:
        context = trace.get_current_span().get_span_context()
    except Exception:  # noqa: BLE001 - a tracing failure must never lose the line
        return None, None
    if not context.is_valid:
        return None, None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"

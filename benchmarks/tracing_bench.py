"""Tracing benchmark: what OpenTelemetry support costs jobdesk's hot paths, with figures printed.

    python benchmarks/tracing_bench.py [--n 200000]

No database: the calls the enqueue and the worker make per job, timed in a loop, in the three
states a process can be in:

* OpenTelemetry not imported (no `otel` extra, or nothing imported it): `tracing.enabled()` is a
  look-up in sys.modules;
* imported but no tracer provider set (FastAPI imports its API when it is installed);
* an SDK tracer provider set, spans exported to nowhere (a processor that drops them): the cost
  of the spans themselves, enqueue span plus trace context, and run span.

Also the import time of `import jobdesk` and of the worker's modules, and whether either loads
any OpenTelemetry module (`python -X importtime`, in fresh interpreters).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from collections.abc import Callable

from jobdesk.core import tracing
from jobdesk.core.models import Job, JobCreate


def per_call_ns(fn: Callable[[], object], n: int) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def enqueue_check() -> None:
    with tracing.enqueueing([JOB_CREATE]):
        pass


def run_check() -> None:
    span = tracing.run_span(JOB)
    if span is not None:
        with span.current():
            pass
        span.end("completed")


JOB_CREATE = JobCreate("noop", {})
JOB = Job("id-1", "noop", {}, None, None, 0)


def state(label: str, n: int) -> None:
    enabled = per_call_ns(tracing.enabled, n)
    enqueue = per_call_ns(lambda: (JOB_CREATE.__setattr__("trace_context", None), enqueue_check()), n)
    run = per_call_ns(run_check, n)
    print(f"  {label:<40} enabled() {enabled:8.0f} ns   enqueue {enqueue:8.0f} ns   run {run:8.0f} ns")


def import_times() -> None:
    for what in ("jobdesk", "jobdesk.runtime.worker, jobdesk.cli.main"):
        out = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {what}"], capture_output=True,
                             text=True, check=True).stderr
        total = sum(int(m.group(1)) for m in re.finditer(r"import time:\s+(\d+) \|", out))
        otel = sum(1 for line in out.splitlines() if "opentelemetry" in line)
        print(f"  import {what:<42} {total / 1000:7.1f} ms (self times summed), opentelemetry modules: {otel}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200_000, help="calls per measurement")
    args = parser.parse_args()
    print(f"jobdesk tracing benchmark: per-job calls, best of 3 loops of {args.n:,}")
    assert "opentelemetry.trace" not in sys.modules
    state("OpenTelemetry not imported", args.n)
    from opentelemetry import trace

    state("imported, no tracer provider", args.n)
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Drop()))
    trace.set_tracer_provider(provider)
    state("SDK tracer provider, spans dropped", args.n // 10)
    import_times()


if __name__ == "__main__":
    main()

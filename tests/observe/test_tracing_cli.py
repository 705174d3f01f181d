"""`jobdesk worker` and the CLI set the OpenTelemetry SDK up from OTEL_TRACES_EXPORTER: the
worker's spans reach an OTLP collector on loopback, in the trace of the CLI's enqueue; an unknown
exporter is one line; without the variable, nothing of OpenTelemetry is imported or stored."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.api.test_api_server import start_api, stop
from tests.cli.test_cli import one_line_error
from tests.helpers import ROOT, cli_env, run_cli, start_worker, wait_for


class Collector:
    """An OTLP/HTTP trace collector on loopback: keeps the spans POSTed to /v1/traces."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path == "/v1/traces":
                    collector.take(ExportTraceServiceRequest.FromString(body))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def take(self, request: ExportTraceServiceRequest) -> None:
        for resource_spans in request.resource_spans:
            resource = {kv.key: kv.value.string_value for kv in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    attributes = {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in span.attributes}
                    self.spans.append({"name": span.name, "trace_id": span.trace_id.hex(),
                                       "parent_span_id": span.parent_span_id.hex(), "attributes": attributes,
                                       "service": resource.get("service.name")})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    try:
        yield c
    finally:
        c.close()


async def test_the_worker_exports_its_runs_over_otlp_in_the_trace_of_the_cli_s_enqueue(
        collector: Collector, conn: asyncpg.Connection, dsn: str, tmp_path: Path) -> None:
    submitted = run_cli("submit", "test.record", dsn=dsn, OTEL_TRACES_EXPORTER="console")
    assert submitted.returncode == 0, submitted.stderr
    job_id = await conn.fetchval("SELECT id FROM jobs")
    assert job_id in submitted.stdout
    # The console exporter printed the CLI's enqueue span, whose trace the job carries.
    assert '"name": "jobdesk.enqueue"' in submitted.stdout
    [trace_id] = set(re.findall(r'"trace_id": "0x([0-9a-f]{32})"', submitted.stdout))
    stored = await conn.fetchval("SELECT trace_context FROM jobs WHERE id = $1", job_id)
    assert stored["traceparent"].split("-")[1] == trace_id

    log = tmp_path / "worker.log"
    proc = start_worker(dsn, log_path=log, JOB_PROCESSOR_MODULES="cli_processors", RUN_LOG=str(tmp_path / "runs"),
                        OTEL_TRACES_EXPORTER="otlp", OTEL_EXPORTER_OTLP_ENDPOINT=collector.url,
                        OTEL_BSP_SCHEDULE_DELAY="100")
    try:
        await wait_for(lambda: conn.fetchval("SELECT status = 'completed' FROM jobs WHERE id = $1", job_id),
                       what="the job")
        await wait_for(lambda: _async([s for s in collector.spans if s["name"] == "jobdesk.run"]),
                       what="the run span at the collector")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0, log.read_text()
    [run] = [s for s in collector.spans if s["name"] == "jobdesk.run"]
    assert run["trace_id"] == trace_id
    assert run["service"] == "jobdesk-worker"
    assert run["attributes"] == {"messaging.system": "jobdesk", "messaging.operation.type": "process",
                                 "messaging.destination.name": "test.record", "messaging.message.id": job_id,
                                 "jobdesk.job.id": job_id, "jobdesk.job.type": "test.record",
                                 "jobdesk.job.attempt": 1, "jobdesk.job.status": "completed"}
    assert run["parent_span_id"] == stored["traceparent"].split("-")[2]  # the CLI's enqueue span


async def _async(value: Any) -> Any:
    return value


async def test_jobdesk_api_exports_its_enqueue_spans_in_the_caller_s_trace(
        collector: Collector, conn: asyncpg.Connection, dsn: str) -> None:
    proc, url = start_api(dsn, "--no-auth", OTEL_TRACES_EXPORTER="otlp", OTEL_EXPORTER_OTLP_ENDPOINT=collector.url,
                          OTEL_SERVICE_NAME="shop-api")
    trace_id, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    try:
        answer = httpx.post(f"{url}/api/jobs", json={"type": "test.record", "input_data": {}},
                            headers={"traceparent": f"00-{trace_id}-{parent}-01"})
        assert answer.status_code == 201, answer.text
    finally:
        assert stop(proc) == 0  # its spans still batched are exported as it stops
    job_id = answer.json()["id"]
    [enqueue] = [s for s in collector.spans if s["name"] == "jobdesk.enqueue"]
    assert enqueue["trace_id"] == trace_id and enqueue["service"] == "shop-api"
    assert enqueue["attributes"]["messaging.message.id"] == job_id
    stored = await conn.fetchval("SELECT trace_context FROM jobs WHERE id = $1", job_id)
    assert stored["traceparent"].split("-")[1] == trace_id


def test_an_unknown_exporter_is_one_line(dsn: str) -> None:
    one_line_error(run_cli("worker", dsn=dsn, OTEL_TRACES_EXPORTER="otlp,jaeger"),
                   "OTEL_TRACES_EXPORTER", "'jaeger'")


async def test_without_tracing_nothing_is_imported_or_stored(conn: asyncpg.Connection, dsn: str) -> None:
    submitted = run_cli("submit", "test.record", dsn=dsn)
    assert submitted.returncode == 0, submitted.stderr
    assert await conn.fetchval("SELECT trace_context FROM jobs") is None
    # The engine, its worker, the client and the CLI import no OpenTelemetry module. (FastAPI
    # imports OpenTelemetry's API itself when it is installed: the API has it loaded, but with no
    # tracer provider set, tracing stays off there too.)
    code = ("import sys, jobdesk, jobdesk.runtime.worker, jobdesk.cli.main, jobdesk.core.tracing as t;"
            "print([m for m in sys.modules if m.startswith('opentelemetry')]);"
            "import jobdesk.api.app; assert 'opentelemetry.trace' in sys.modules; assert not t.enabled()")
    out = subprocess.run([sys.executable, "-c", code], env=cli_env(dsn), capture_output=True, text=True, cwd=ROOT,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"

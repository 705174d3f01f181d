"""A schemathesis run over the API's own /openapi.json against a real `jobdesk api` on loopback:
no answer is a 5xx, and every answer conforms to the schema. Bounded: a few examples per route."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from jobdesk.core.settings import load_settings
from jobdesk.service.jobs import JobService
from tests import pg
from tests.api.test_api_server import start_api, stop
from tests.helpers import run_cli


@pytest.fixture(scope="module")
def api_server(template: str, pg_server) -> Iterator[tuple[str, str]]:  # type: ignore[no-untyped-def]
    """A running API on its own database, with some jobs and a pipeline to find, and a token."""
    dsn = asyncio.run(pg.create_test_database(template))

    async def seed() -> None:
        async with await JobService.connect(dsn, settings=load_settings(DATABASE_URL=dsn), pool_size=2) as jobs:
            await jobs.enqueue("echo", {"n": 1})
            await jobs.enqueue("sleep", {"seconds": 0})

    asyncio.run(seed())
    token = run_cli("token", "create", "--name", "schemathesis", dsn=dsn).stdout.strip()
    proc, url = start_api(dsn)
    try:
        yield url, token
    finally:
        assert stop(proc) == 0
        asyncio.run(pg.drop_test_database(dsn))


CHECKS = [status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance]


@pytest.mark.timeout(360)
def test_no_server_error_and_every_answer_fits_the_schema(api_server: tuple[str, str]) -> None:
    url, token = api_server
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    tried = 0
    for result in schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
                  database=None)
        def check(case) -> None:  # type: ignore[no-untyped-def]
            response = case.call(headers={"Authorization": f"Bearer {token}"}, timeout=10)
            assert response.status_code < 500, \
                f"{case.method} {case.formatted_path}: {response.status_code} {response.text}"
            case.validate_response(response, checks=CHECKS)

        check()
        tried += 1
    assert tried >= 15, "every route of the API was exercised"


def test_the_schema_names_every_contract_route(api_server: tuple[str, str]) -> None:
    import httpx

    url, _token = api_server
    document = httpx.get(f"{url}/openapi.json", timeout=10).json()
    paths = document["paths"]
    # /docs shows its sections in the document's tag order, jobs first, whatever order the
    # routes are matched in.
    assert [t["name"] for t in document["tags"]] == ["jobs", "pipelines", "bulk", "schedules", "types", "events",
                                                        "system"]
    used = {tag for operations in paths.values() for operation in operations.values() for tag in operation["tags"]}
    assert used == {t["name"] for t in document["tags"]}
    for route in ("/api/jobs", "/api/jobs/{job_id}", "/api/jobs/{job_id}/events", "/api/jobs/{job_id}/cancel",
                  "/api/jobs/{job_id}/retry", "/api/jobs/{job_id}/approve", "/api/jobs/{job_id}/reject",
                  "/api/pipelines", "/api/pipelines/{pipeline_id}", "/api/pipelines/{pipeline_id}/cancel",
                  "/api/pipelines/{pipeline_id}/retry-failed", "/api/events", "/healthz"):
        assert route in paths, route

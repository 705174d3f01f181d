"""Why a job held back by flow control waits: a full rate, a user at their limit, fair share;
through JobService, `jobdesk show`, GET /api/jobs/{id} and the API's /metrics."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import asyncpg
import pytest

from jobdesk.core.limits import ClaimLimits, FlowConfig, Rate, next_start_text
from jobdesk.core.models import JobCreate
from jobdesk.service.jobs import JobService
from jobdesk.store import flow_limits, transitions
from tests.api.conftest import Api, api  # noqa: F401  (the API fixture)
from tests.helpers import run_cli
from tests.store.test_waiting import add_worker, reason


@pytest.fixture
async def service(dsn: str) -> AsyncIterator[JobService]:
    svc = await JobService.connect(dsn, pool_size=2)
    yield svc
    await svc.close()


async def test_a_full_rate_says_when_the_next_start_comes(service: JobService, conn: asyncpg.Connection,
                                                          dsn: str) -> None:
    await add_worker(conn, "w", ["image.generate"])
    await flow_limits.declare(conn, {"image.generate": FlowConfig(rate=Rate(10, 3600))})
    ids = await transitions.enqueue(conn, [JobCreate("image.generate", {}) for _ in range(12)])
    held: dict[str, float] = {}
    _, jobs = await transitions.complete_and_claim(conn, "w", ["image.generate"], 12, (),
                                                   ClaimLimits(flow=frozenset({"image.generate"})), held=held)
    assert len(jobs) == 10 and 3590 < held["image.generate"] <= 3600
    why = await service.waiting_reason(ids[-1])
    assert why is not None and why.kind == "rate_limit"
    pattern = r"rate limit of image\.generate \(10/h\) reached, next start in 3[56]\d\d\.\d s"
    assert re.fullmatch(pattern, why.text), why.text
    detail = await service.job_detail(ids[-1])
    assert detail.waiting_reason is not None and re.fullmatch(pattern, detail.waiting_reason)
    shown = run_cli("show", ids[-1], dsn=dsn)
    assert "rate limit of image.generate (10/h) reached, next start in " in shown.stdout


def test_a_short_wait_is_in_milliseconds() -> None:
    assert next_start_text(0.08) == "in 80 ms"
    assert next_start_text(2.5) == "in 2.5 s"


async def test_a_user_at_their_limit(service: JobService, conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO users (id, name) VALUES (42, 'u42')")
    await add_worker(conn, "w", ["video.render"])
    await flow_limits.declare(conn, {"video.render": FlowConfig(user_max_running=1)})
    ids = await transitions.enqueue(conn, [JobCreate("video.render", {}, user_id=42) for _ in range(2)])
    await transitions.complete_and_claim(conn, "w", ["video.render"], 5, (),
                                         ClaimLimits(flow=frozenset({"video.render"})))
    assert await reason(service, ids[1]) == ("user_limit", "user 42 has 1 of 1 video.render running")


async def test_fair_share_names_the_users_ahead(service: JobService, conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO users (id, name) SELECT g, 'u' || g FROM generate_series(2, 5) g")
    await add_worker(conn, "w", ["video.render"])
    await flow_limits.declare(conn, {"video.render": FlowConfig(fair_share=True)})
    await transitions.enqueue(conn, [JobCreate("video.render", {}, user_id=u) for u in (2, 3, 4)])
    [mine] = await transitions.enqueue(conn, [JobCreate("video.render", {}, user_id=5)])
    assert await reason(service, mine) == ("fair_share", "fair share: 3 other users' jobs go first")


async def test_metrics_count_the_jobs_held_back(conn: asyncpg.Connection, dsn: str) -> None:
    from jobdesk.api.metrics import ApiMetrics

    await flow_limits.declare(conn, {"image.generate": FlowConfig(rate=Rate(1, 3600))})
    await transitions.enqueue(conn, [JobCreate("image.generate", {}) for _ in range(4)])
    await transitions.complete_and_claim(conn, "w", ["image.generate"], 4, (),
                                         ClaimLimits(flow=frozenset({"image.generate"})))
    service = await JobService.connect(dsn, pool_size=2)
    try:
        text = (await ApiMetrics().render(service)).decode()
    finally:
        await service.close()
    assert 'jobdesk_jobs_held_back{limit="rate",type="image.generate"} 3.0' in text


async def test_the_api_gives_each_reason(api: Api, conn: asyncpg.Connection) -> None:  # noqa: F811
    """GET /api/jobs/{id}'s waiting_reason, for a full rate, a user at their limit and fair share."""
    await conn.execute("INSERT INTO users (id, name) SELECT g, 'u' || g FROM generate_series(2, 5) g "
                       "ON CONFLICT DO NOTHING")
    await add_worker(conn, "w", ["image.generate", "video.render", "video.script"])
    await flow_limits.declare(conn, {"image.generate": FlowConfig(rate=Rate(1, 3600)),
                                     "video.render": FlowConfig(user_max_running=1),
                                     "video.script": FlowConfig(fair_share=True)})
    images = await transitions.enqueue(conn, [JobCreate("image.generate", {}) for _ in range(2)])
    renders = await transitions.enqueue(conn, [JobCreate("video.render", {}, user_id=2) for _ in range(2)])
    await transitions.complete_and_claim(conn, "w", ["image.generate", "video.render"], 4, (),
                                         ClaimLimits(flow=frozenset({"image.generate", "video.render"})))
    await transitions.enqueue(conn, [JobCreate("video.script", {}, user_id=u) for u in (2, 3)])
    [script] = await transitions.enqueue(conn, [JobCreate("video.script", {}, user_id=5)])

    async def why(job_id: str) -> str:
        got = await api.client.get(f"/api/jobs/{job_id}")
        assert got.status_code == 200, got.text
        return str(got.json()["waiting_reason"])

    assert re.fullmatch(r"rate limit of image\.generate \(1/h\) reached, next start in 3[56]\d\d\.\d s",
                        await why(images[1]))
    assert await why(renders[1]) == "user 2 has 1 of 1 video.render running"
    assert await why(script) == "fair share: 2 other users' jobs go first"

"""Typed processor inputs: a processor's `input_model` checks `input_data` in the worker before
`process`, and in `jobdesk submit` at enqueue time."""

from __future__ import annotations

import json
from pathlib import Path

import asyncpg
import pytest

from jobdesk.core.input_validation import InvalidInput, make_validator
from jobdesk.runtime.registry import input_schemas, load_processor_classes
from tests.helpers import run_cli, start_worker, wait_for

GOOD_ORDER = {"customer": "ada", "lines": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 3}]}
BAD_ORDER = {"customer": "ada", "lines": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 0}]}


def one_line_error(done, *needles: str) -> None:  # type: ignore[no-untyped-def]
    assert done.returncode == 1, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_one_validator_names_the_field_path() -> None:
    validate = make_validator(load_processor_classes(["tests.typed_processors"]))
    validate("test.invoice", GOOD_ORDER)
    validate("echo", {"anything": [1, {"goes": None}]})
    validate("unknown.type", {"x": 1})  # no processor loaded: nothing to check against
    with pytest.raises(InvalidInput) as caught:
        validate("test.invoice", BAD_ORDER)
    assert caught.value.fields == [("input_data.lines[1].qty", "Input should be greater than 0 (got 0)")]
    with pytest.raises(InvalidInput) as caught:
        validate("sleep", {"seconds": True})
    assert [path for path, _ in caught.value.fields] == ["input_data.seconds"]
    with pytest.raises(InvalidInput, match=r"input_data\.customer: Field required"):
        validate("test.invoice", {"lines": []})


def test_the_registry_gives_each_types_json_schema() -> None:
    schemas = input_schemas(load_processor_classes(["tests.typed_processors"]))
    assert schemas["sleep"] is not None and schemas["sleep"]["properties"]["seconds"]["minimum"] == 0
    assert schemas["echo"] is not None and schemas["echo"]["additionalProperties"] is True
    assert schemas["test.invoice"] is not None and schemas["test.invoice"]["required"] == ["customer", "lines"]
    assert {"video.script", "video.voice", "video.image", "video.render", "video.composite"} <= set(schemas)
    assert schemas["video.script"] is not None and "fail_rate" in schemas["video.script"]["properties"]


async def test_submit_refuses_a_mismatch_with_one_line(dsn: str, conn: asyncpg.Connection) -> None:
    one_line_error(run_cli("submit", "sleep", "--input", '{"seconds": -1}', dsn=dsn), "input_data.seconds",
                   "greater than or equal to 0")
    one_line_error(run_cli("submit", "video.script", "--input", '{"fail_rate": 2}', dsn=dsn), "input_data.fail_rate")
    bad = json.dumps(BAD_ORDER)
    one_line_error(run_cli("submit", "test.invoice", "--input", bad, "--processors", "typed_processors", dsn=dsn),
                   "input_data.lines[1].qty")
    one_line_error(run_cli("submit", "test.invoice", "--input", bad, dsn=dsn, JOB_PROCESSOR_MODULES="typed_processors"),
                   "input_data.lines[1].qty")
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 0, "nothing was enqueued"
    one_line_error(run_cli("submit", "test.invoice", "--processors", "no_such_module", dsn=dsn), "no_such_module")

    ok = run_cli("submit", "test.invoice", "--input", json.dumps(GOOD_ORDER), "--processors", "typed_processors",
                 "--json", dsn=dsn)
    assert ok.returncode == 0, ok.stderr
    unchecked = run_cli("submit", "test.invoice", "--input", bad, "--json", dsn=dsn)
    assert unchecked.returncode == 0, "without its processor loaded, submit cannot check the input"
    assert await conn.fetchval("SELECT count(*) FROM jobs") == 2


async def test_the_worker_fails_a_mismatch_at_once(dsn: str, conn: asyncpg.Connection, tmp_path: Path) -> None:
    # Plain SQL skips every enqueue-time check; the worker still refuses the input.
    ids = {}
    jobs = (("bad_order", "test.invoice", BAD_ORDER), ("good_order", "test.invoice", GOOD_ORDER),
            ("bad_sleep", "sleep", {"seconds": "a while"}), ("good_sleep", "sleep", {"seconds": 0}))
    for name, job_type, data in jobs:
        ids[name] = await conn.fetchval("INSERT INTO jobs (type, input_data) VALUES ($1, $2) RETURNING id",
                                        job_type, data)
    worker = start_worker(dsn, "--processors", "typed_processors", log_path=tmp_path / "worker.log",
                          JOB_RETRY_INTERVALS="0.1,0.1,0.1")
    try:
        async def finished() -> bool:
            done = await conn.fetchval("SELECT count(*) FROM jobs WHERE status IN ('completed', 'failed')")
            return done == len(ids)

        await wait_for(finished, timeout=30, what="every job finished")
    finally:
        worker.terminate()
        worker.wait(30)
    rows = {r["id"]: r for r in await conn.fetch("SELECT id, status, retry_count, attempts, error_message, "
                                                  "result_data FROM jobs")}
    for name, path in (("bad_order", "input_data.lines[1].qty"), ("bad_sleep", "input_data.seconds")):
        row = rows[ids[name]]
        assert row["status"] == "failed" and row["retry_count"] == 0 and row["attempts"] == 1, dict(row)
        assert path in row["error_message"], row["error_message"]
    assert rows[ids["good_order"]]["status"] == "completed" and rows[ids["good_order"]]["result_data"] == {"items": 5}
    assert rows[ids["good_sleep"]]["status"] == "completed"
    shown = run_cli("show", ids["bad_order"], dsn=dsn).stdout
    assert "input_data.lines[1].qty: Input should be greater than 0" in shown

"""`jobdesk retry ID --input`, `jobdesk jobs --search` with input terms, `jobdesk export` and
`jobdesk open`, run as a user runs them: a subprocess against a real database."""

from __future__ import annotations

import csv
import io
import json

import asyncpg

from tests.cli.test_cli import one_line_error
from tests.helpers import run_cli

GOOD_ORDER = {"customer": "acme", "lines": [{"sku": "a-1", "qty": 2}]}


async def _failed_job(conn: asyncpg.Connection, job_type: str, input_data: dict[str, object]) -> str:
    return str(await conn.fetchval(
        "INSERT INTO jobs (type, input_data, status, error_message, retry_count) "
        "VALUES ($1, $2::text::jsonb, 'failed', 'boom', 3) RETURNING id", job_type, json.dumps(input_data)))


async def test_retry_with_a_new_input_keeps_the_old_one_in_the_audit_log(dsn: str, conn: asyncpg.Connection) -> None:
    job_id = await _failed_job(conn, "test.invoice", {"customer": "acme", "lines": [{"sku": "a-1", "qty": 0}]})
    done = run_cli("retry", job_id, "--input", json.dumps(GOOD_ORDER), "--processors", "typed_processors",
                   "--json", dsn=dsn)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"action": "retry", "jobs": [job_id]}
    row = await conn.fetchrow("SELECT status, input_data::text, retry_count, error_message FROM jobs WHERE id = $1",
                              job_id)
    assert (row["status"], json.loads(row["input_data"]), row["retry_count"], row["error_message"]) == (
        "queued", GOOD_ORDER, 0, None)
    audit = await conn.fetch("SELECT action, source, job_ids, reason FROM audit_log ORDER BY id")
    assert [(a["action"], a["source"], a["job_ids"]) for a in audit] == [("edit input", "cli", [job_id]),
                                                                         ("retry", "cli", [job_id])]
    assert json.loads(audit[0]["reason"]) == {"customer": "acme", "lines": [{"sku": "a-1", "qty": 0}]}
    text = run_cli("show", job_id, dsn=dsn)
    assert '"qty": 2' in text.stdout


async def test_a_bad_new_input_is_one_line_and_changes_nothing(dsn: str, conn: asyncpg.Connection) -> None:
    old = {"customer": "acme", "lines": []}
    job_id = await _failed_job(conn, "test.invoice", old)
    one_line_error(run_cli("retry", job_id, "--input", "{not json", dsn=dsn), "--input", "JSON")
    one_line_error(run_cli("retry", job_id, "--input", "[1]", dsn=dsn), "JSON object")
    bad = {"customer": "acme", "lines": [{"sku": "a-1", "qty": -1}]}
    one_line_error(run_cli("retry", job_id, "--input", json.dumps(bad), "--processors", "typed_processors",
                           dsn=dsn), "input_data.lines[0].qty")
    one_line_error(run_cli("retry", job_id, "x", "--input", "{}", dsn=dsn), "--input works on one job id")
    one_line_error(run_cli("retry", "ghost", "--input", "{}", dsn=dsn), "no job with id ghost")
    queued = str(await conn.fetchval("INSERT INTO jobs (type, input_data) VALUES ('echo', '{}') RETURNING id"))
    one_line_error(run_cli("retry", queued, "--input", "{}", dsn=dsn), "cannot retry", "it is queued")
    row = await conn.fetchrow("SELECT status, input_data::text FROM jobs WHERE id = $1", job_id)
    assert (row["status"], json.loads(row["input_data"])) == ("failed", old)
    assert await conn.fetchval("SELECT count(*) FROM audit_log") == 0


async def test_jobs_search_by_input_path(dsn: str, conn: asyncpg.Connection) -> None:
    await conn.execute("""INSERT INTO jobs (id, type, input_data) VALUES
        ('n42', 'order', '{"order_id": 42, "user": {"plan": "business"}}'),
        ('n420', 'order', '{"order_id": 420, "user": {"plan": "businessplus"}}'),
        ('s42', 'order', '{"order_id": "42", "user": {"plan": "free plan"}}')""")

    def ids(query: str) -> set[str]:
        done = run_cli("jobs", "--search", query, "--json", dsn=dsn)
        assert done.returncode == 0, done.stderr
        return {j["id"] for j in json.loads(done.stdout)}

    assert ids("input.order_id:42") == {"n42"}
    assert ids('input.order_id:"42"') == {"s42"}
    assert ids("input.user.plan:business") == {"n42"}
    assert ids('input.user.plan:"free plan"') == {"s42"}
    one_line_error(run_cli("jobs", "--search", "input..plan:x", dsn=dsn), "--search", "input..plan: malformed path")
    one_line_error(run_cli("jobs", "--search", "input:x", dsn=dsn), "--search", "name a path")


async def test_export_csv_and_jsonl_carry_every_column_id_first(dsn: str, conn: asyncpg.Connection) -> None:
    tricky = 'a "quoted", comma\nand a second line'
    await conn.execute("INSERT INTO jobs (id, type, input_data, status, error_message) VALUES "
                       "('j1', 'pdf', '{\"order_id\": 1}', 'failed', $1), "
                       "('j2', 'pdf', '{\"order_id\": 2}', 'queued', NULL), "
                       "('j3', 'mail', '{\"order_id\": 1}', 'failed', 'x')", tricky)
    columns = [r["column_name"] for r in await conn.fetch(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'jobs' ORDER BY ordinal_position")]
    done = run_cli("export", "--format", "csv", "--type", "pdf", dsn=dsn)
    assert done.returncode == 0, done.stderr
    rows = list(csv.reader(io.StringIO(done.stdout, newline="")))
    header, body = rows[0], rows[1:]
    assert header[0] == "id" and sorted(header) == sorted(columns)
    by_id = {r[0]: dict(zip(header, r)) for r in body}
    assert set(by_id) == {"j1", "j2"}
    assert by_id["j1"]["error_message"] == tricky and by_id["j2"]["error_message"] == ""
    assert json.loads(by_id["j1"]["input_data"]) == {"order_id": 1} and by_id["j1"]["is_active"] == "true"
    assert '"a ""quoted"", comma' in done.stdout  # the csv module quoted the field that needed it

    done = run_cli("export", "--format", "jsonl", "--search", "input.order_id:1", dsn=dsn)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [j["id"] for j in lines] == ["j3", "j1"]  # newest first
    assert all(list(j)[0] == "id" and sorted(j) == sorted(columns) for j in lines)
    assert lines[1]["error_message"] == tricky and lines[1]["input_data"] == {"order_id": 1}
    one_line_error(run_cli("export", "--format", "xml", dsn=dsn), "--format", "xml")
    one_line_error(run_cli("export", "--search", "input.:1", dsn=dsn), "--search", "name a path")


async def test_export_streams_many_pages(dsn: str, conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO jobs (type, input_data) SELECT 'bulk', jsonb_build_object('n', g) "
                       "FROM generate_series(1, 2500) g")
    done = run_cli("export", "--format", "jsonl", dsn=dsn)
    assert done.returncode == 0, done.stderr
    numbers = [json.loads(line)["input_data"]["n"] for line in done.stdout.splitlines()]
    assert numbers == list(range(2500, 0, -1))  # three pages of 1,000, no job twice, none left out


async def test_open_an_unknown_job_is_one_line_and_no_window(dsn: str) -> None:
    # No display at all: had it reached the console, Qt could not have opened a window either,
    # and the message would have been another one.
    proc = run_cli("open", "ghost", dsn=dsn, QT_QPA_PLATFORM="")
    one_line_error(proc, "no job with id ghost")
    assert proc.stdout == ""

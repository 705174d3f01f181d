"""`input.PATH:VALUE` search terms: exact and typed from the input's root, on the server; the GIN
index of sql/030 serves them; a malformed path is a message, not a filter."""

from __future__ import annotations

import re

import asyncpg

from jobdesk.store.jobs import InputTerm, JobFilter, fetch_page, status_counts
from jobdesk.store.search_syntax import parse_search

INPUTS = {
    "num": '{"order_id": 42, "user": {"plan": "business"}}',
    "num420": '{"order_id": 420, "user": {"plan": "businessplus"}}',
    "str42": '{"order_id": "42", "user": {"plan": "free"}}',
    "float": '{"order_id": 42.0, "note": "two words"}',
    "nested": '{"user": {"plan": {"name": "business"}}, "flag": true, "gone": null}',
    "array": '{"order_id": [42], "flag": "true", "gone": "null"}',
    "deep": '{"a": {"user": {"plan": "business"}}}',
}


async def _fill(conn: asyncpg.Connection) -> None:
    await conn.executemany("INSERT INTO jobs (id, type, input_data, status) VALUES ($1, 'search', $2::text::jsonb, "
                           "'queued')", list(INPUTS.items()))


async def _ids(conn: asyncpg.Connection, text: str) -> set[str]:
    parsed = parse_search(text)
    assert parsed.errors == [], parsed.errors
    return {r.id for r in (await fetch_page(conn, parsed.filter)).rows}


async def test_exact_and_typed_from_the_root(conn: asyncpg.Connection) -> None:
    await _fill(conn)
    # The number 42 (42.0 is the same number), not 420, not the string "42", not [42].
    assert await _ids(conn, "input.order_id:42") == {"num", "float"}
    assert await _ids(conn, 'input.order_id:"42"') == {"str42"}
    # A whole string, at that path from the root: not businessplus, not an object, not deeper down.
    assert await _ids(conn, "input.user.plan:business") == {"num"}
    assert await _ids(conn, "input.user.plan:BUSINESS") == set()
    assert await _ids(conn, 'input.note:"two words"') == {"float"}
    assert await _ids(conn, "input.note:two") == set()
    # true, false and null are typed; quoted they are strings.
    assert await _ids(conn, "input.flag:true") == {"nested"}
    assert await _ids(conn, 'input.flag:"true"') == {"array"}
    assert await _ids(conn, "input.gone:null") == {"nested"}
    assert await _ids(conn, "input.gone:'null'") == {"array"}
    # Terms add up with each other, with free text and with the other keys.
    assert await _ids(conn, "input.order_id:42 input.user.plan:business") == {"num"}
    assert await _ids(conn, "input.order_id:42 two") == {"float"}
    assert await _ids(conn, "status:failed input.order_id:42") == set()
    counts = await status_counts(conn, parse_search("input.order_id:42").filter)
    assert counts.counts.get("queued") == 2


async def test_the_index_serves_the_term(conn: asyncpg.Connection) -> None:
    assert await conn.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = 'jobs_input_data_path_idx'") == (
        "CREATE INDEX jobs_input_data_path_idx ON ONLY public.jobs USING gin (input_data jsonb_path_ops)"
        " WHERE (input_data <> '{}'::jsonb)")
    await conn.execute("""INSERT INTO jobs (type, input_data, status)
                          SELECT 'bulk', jsonb_build_object('order_id', g), 'completed'
                            FROM generate_series(1, 20000) g""")
    await conn.execute("ANALYZE jobs")
    params: list[object] = []
    where = parse_search("input.order_id:4242").filter.where(params)
    plan = "\n".join(r[0] for r in await conn.fetch(f"EXPLAIN SELECT id FROM jobs WHERE {where}", *params))
    # The partition of completed jobs that holds them reads its copy of the index (named after
    # the column), the empty ones whatever is cheapest.
    assert re.search(r"Bitmap Index Scan on jobs_completed_\w+_input_data_idx", plan), plan


def test_malformed_paths_and_values_are_messages() -> None:
    cases = {
        "input..plan:x": "input..plan: malformed path",
        "input.user.:x": "input.user.: malformed path",
        "input.us$er:x": "input.us$er: malformed path",
        "input:x": "input: name a path inside the input",
        "input.:x": "input.: name a path inside the input",
        "input.plan:": "input.plan: needs a value",
        "input.n:1e999": "input.n: 1e999 is not a finite number",
    }
    for text, message in cases.items():
        parsed = parse_search(text)
        assert len(parsed.errors) == 1 and parsed.errors[0].startswith(message), (text, parsed.errors)
        assert parsed.filter == JobFilter(), text


def test_terms_read_as_typed_values() -> None:
    terms = parse_search('input.a:42 input.b:"42" input.c:-1.5 input.d:false input.e:null input.f:"a b" '
                         'input.g:4x2 input.h:""').filter.input_terms
    assert terms == (InputTerm(("a",), 42), InputTerm(("b",), "42"), InputTerm(("c",), -1.5),
                     InputTerm(("d",), False), InputTerm(("e",), None), InputTerm(("f",), "a b"),
                     InputTerm(("g",), "4x2"), InputTerm(("h",), ""))
    assert [type(t.value) for t in terms[:5]] == [int, str, float, bool, type(None)]
    assert parse_search("input.user.plan:business").filter.input_terms[0].document() == (
        '{"user": {"plan": "business"}}')
    assert parse_search("input.user.plan:business").filter.describe() == 'input.user.plan = "business"'

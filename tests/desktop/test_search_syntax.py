"""The search box's language, parsed alone; and the filter fields it needs, on the server."""

from __future__ import annotations

import asyncpg

from jobdesk.console.jobs.search_syntax import completions, parse_search
from jobdesk.core.models import Status
from jobdesk.store.jobs import JobFilter, fetch_page, glob_matches, glob_to_like


def test_every_key_and_free_text() -> None:
    parsed = parse_search('status:failed type:video.* pipeline:p-1 user:3 error:"connection timeout" cats dogs')
    assert parsed.errors == []
    f = parsed.filter
    assert f.statuses == {Status.FAILED}
    assert f.type is None and f.type_pattern == "video.*"
    assert f.pipeline_id == "p-1" and f.user_id == 3
    assert f.error == "connection timeout"
    assert f.search == "cats dogs"


def test_statuses_add_up_and_an_exact_type_is_exact() -> None:
    f = parse_search("status:failed,queued STATUS:waiting_approval type:email").filter
    assert f.statuses == {Status.FAILED, Status.QUEUED, Status.WAITING_APPROVAL}
    assert f.type == "email" and f.type_pattern is None and f.search is None


def test_terms_replace_the_base_fields_and_keep_the_rest() -> None:
    base = JobFilter(statuses=frozenset({Status.QUEUED}), type="echo", user_id=1)
    f = parse_search("type:video.*", base).filter
    assert f.type is None and f.type_pattern == "video.*"
    assert f.statuses == {Status.QUEUED} and f.user_id == 1


def test_bad_terms_are_messages_and_are_left_out() -> None:
    parsed = parse_search("colour:red status:broken user:me error: boom")
    assert parsed.errors == [
        "unknown key 'colour': use status:, type:, pipeline:, user:, error:, input.PATH:",
        "unknown status 'broken': use queued, in_progress, completed, failed, cancelled, waiting_approval",
        "user: 'me' is not a number",
        "error: needs a value (text in the error message (quote it to include spaces))",
    ]
    assert parsed.filter == JobFilter(search="boom")


def test_an_open_quote_is_closed_for_you() -> None:
    parsed = parse_search('error:"time')
    assert parsed.errors == ["a quote is not closed"]
    assert parsed.filter.error == "time"


def test_ids_and_urls_stay_free_text() -> None:
    assert parse_search("a7e1-22").filter.search == "a7e1-22"
    assert parse_search(":x").filter.search == ":x"


def test_completions_offer_keys_and_statuses() -> None:
    offered = completions()
    assert "status:" in offered and "error:" in offered and "status:waiting_approval" in offered


def test_globs() -> None:
    assert glob_to_like("video.*") == "video.%"
    assert glob_to_like("resize_50%*") == "resize\\_50\\%%"
    assert glob_matches("video.*", "video.render") and not glob_matches("video.*", "xvideo.render")
    assert glob_matches("*.render", "video.render") and glob_matches("a*c*e", "abcde")
    assert not glob_matches("a*c*e", "abde") and glob_matches("echo", "echo") and not glob_matches("echo", "echo2")


async def test_type_pattern_and_error_on_the_server(conn: asyncpg.Connection) -> None:
    await conn.execute("""INSERT INTO jobs (id, type, input_data, status, error_message) VALUES
        ('a', 'video.render', '{}', 'failed', 'Timeout after 30 s'), ('b', 'video.script', '{}', 'queued', NULL),
        ('c', 'videoXrender', '{}', 'failed', 'disk full'), ('d', 'resize_50%', '{}', 'failed', '100% TIMEOUT'),
        ('e', 'resizeX50Y', '{}', 'queued', NULL)""")

    async def ids(text: str) -> set[str]:
        page = await fetch_page(conn, parse_search(text).filter)
        return {r.id for r in page.rows}

    assert await ids("type:video.*") == {"a", "b"}  # the dot is literal, not "any character"
    assert await ids("type:resize_50%*") == {"d"}  # so are LIKE's own wildcards
    assert await ids('error:"timeout"') == {"a", "d"}
    assert await ids("status:failed type:video.* error:timeout") == {"a"}
    assert await ids("error:100%") == {"d"}

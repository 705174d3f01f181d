"""The claim statements are what the golden files hold, byte for byte, and the limited ones
keep the lock of their type's limit. The engine's speed was measured with these statements:
a change to them is a change to the hot path, to be meant and benchmarked."""

from __future__ import annotations

import difflib

import pytest

from jobdesk.store import transitions
from tests.store.golden_claim import GOLDEN, variants

REGENERATE = ("If the change to the SQL is meant, regenerate the golden files with "
              "`python -m tests.store.golden_claim --write` and review their diff in the commit.")


@pytest.mark.parametrize("name", sorted(variants()))
def test_statement_matches_its_golden_file(name: str) -> None:
    expected = (GOLDEN / f"{name}.sql").read_text(encoding="utf-8")
    actual = variants()[name]()
    if actual != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(keepends=True), actual.splitlines(keepends=True),
                                            f"golden/{name}.sql", f"{name} as built now"))
        pytest.fail(f"the {name} statement differs from its golden file:\n{diff}\n{REGENERATE}", pytrace=False)


def test_every_golden_file_is_a_variant() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.sql")) == sorted(variants())


@pytest.mark.parametrize("exchange", [False, True])
def test_limited_claims_lock_their_type_limit(exchange: bool) -> None:
    sql = transitions.claim_statement(1, exchange=exchange, limited=True)
    assert transitions.TYPE_LIMIT_LOCK in sql
    assert "jobdesk_type_room($1::varchar, ($2::text[])[1], (SELECT max_running FROM lk)" in sql
    # Both the walk's and the merge's LIMIT are the room's, never the $3 asked for.
    assert sql.count("LIMIT (SELECT n FROM room)") == 2
    assert "LIMIT (SELECT $3::int)" not in sql
    # The lock is taken before the jobs are: lk comes before due.
    assert sql.index("lk AS (") < sql.index("due AS (")


@pytest.mark.parametrize("n_types", [1, transitions.UNION_MAX_TYPES, transitions.UNION_MAX_TYPES + 1])
@pytest.mark.parametrize("exchange", [False, True])
def test_unlimited_claims_read_no_type_limit(n_types: int, exchange: bool) -> None:
    sql = transitions.claim_statement(n_types, (0, 2), exchange=exchange)
    assert "type_limits" not in sql and "room" not in sql
    assert sql.count("LIMIT (SELECT $3::int)") == 2


def test_only_the_claim_alone_commits_asynchronously() -> None:
    assert "synchronous_commit" in transitions.claim_statement(3)
    assert "synchronous_commit" not in transitions.claim_statement(3, exchange=True)


@pytest.mark.parametrize("n_types, lane", [(2, None), (1, (0, 2))])
def test_a_limited_claim_is_of_one_type_without_a_lane(n_types: int, lane: tuple[int, int] | None) -> None:
    with pytest.raises(ValueError):
        transitions.claim_statement(n_types, lane, limited=True)

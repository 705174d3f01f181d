"""The live-update diff, alone: removals, updates, inserts and moves on a sorted, paged list."""

from __future__ import annotations

import random
from dataclasses import dataclass

from jobdesk.console.live_diff import apply, diff_rows, insert_position, reload_diff


@dataclass(frozen=True)
class Row:
    key: str
    rank: int
    note: str = ""


def by_rank(row: Row) -> tuple[int, str]:
    return row.rank, row.key


def diff(rows: list[Row], changed: set[str], fresh: dict[str, Row], **kw: object):  # type: ignore[no-untyped-def]
    return diff_rows(rows, changed, fresh, key=lambda r: r.key, sort_key=by_rank, **kw)  # type: ignore[arg-type]


ROWS = [Row("e", 5), Row("d", 4), Row("c", 3), Row("b", 2)]  # newest first


def test_nothing_changed_is_an_empty_diff() -> None:
    assert not diff(ROWS, {"c"}, {"c": Row("c", 3)}).removals
    assert diff(ROWS, set(), {}).updates == [] and not diff(ROWS, set(), {})


def test_update_in_place() -> None:
    d = diff(ROWS, {"c"}, {"c": Row("c", 3, "done")})
    assert d.removals == [] and d.inserts == [] and d.updates == [(2, Row("c", 3, "done"))]


def test_deleted_and_unmatched_rows_leave() -> None:
    d = diff(ROWS, {"d", "b", "zz"}, {"b": Row("b", 2, "failed")}, matches=lambda r: r.note != "failed")
    assert d.removals == [3, 1] and d.updates == [] and d.inserts == []
    assert apply(ROWS, d) == [Row("e", 5), Row("c", 3)]


def test_new_rows_go_in_one_block_per_gap() -> None:
    fresh = {"g": Row("g", 7), "f": Row("f", 6), "cc": Row("cc", 3, "x")}
    d = diff(ROWS, set(fresh), fresh)
    assert d.inserts == [(2, [Row("cc", 3, "x")]), (0, [Row("g", 7), Row("f", 6)])]
    assert [r.key for r in apply(ROWS, d)] == ["g", "f", "e", "d", "cc", "c", "b"]


def test_a_row_whose_sort_key_changed_moves() -> None:
    d = diff(ROWS, {"b"}, {"b": Row("b", 9)})
    assert d.removals == [3] and d.inserts == [(0, [Row("b", 9)])]
    assert [r.key for r in apply(ROWS, d)] == ["b", "e", "d", "c"]


def test_rows_past_the_loaded_end_wait_for_their_page() -> None:
    fresh = {"a": Row("a", 1)}
    assert diff(ROWS, {"a"}, fresh, has_more=True).inserts == []
    assert diff(ROWS, {"a"}, fresh, has_more=False).inserts == [(4, [Row("a", 1)])]
    assert insert_position(ROWS, Row("a", 1), by_rank, descending=True, has_more=True) is None


def test_ascending_order() -> None:
    rows = list(reversed(ROWS))
    d = diff(rows, {"x", "d"}, {"x": Row("x", 1), "d": Row("d", 6)}, descending=False)
    assert [r.key for r in apply(rows, d)] == ["x", "b", "c", "e", "d"]


def test_random_changes_keep_the_list_sorted_and_complete() -> None:
    rng = random.Random(7)
    for _ in range(200):
        rows = sorted({Row(f"k{i}", rng.randrange(50)) for i in range(rng.randrange(0, 30))}, key=by_rank,
                      reverse=True)
        everything = {r.key: r for r in rows}
        changed = {f"k{rng.randrange(40)}" for _ in range(rng.randrange(0, 10))}
        fresh = {k: Row(k, rng.randrange(50)) for k in changed if rng.random() < 0.8}
        keep = lambda r: r.rank % 7 != 0  # noqa: E731
        result = apply(rows, diff(rows, changed, fresh, matches=keep))
        everything.update(fresh)
        for k in changed - set(fresh):
            everything.pop(k, None)
        expected = sorted((r for k, r in everything.items() if k not in changed or keep(r)), key=by_rank,
                          reverse=True)
        assert result == expected


# -- a reload of the first page, applied row by row ---------------------------------------------

def reload(rows: list[Row], fresh: list[Row]):  # type: ignore[no-untyped-def]
    return reload_diff(rows, fresh, key=lambda r: r.key)


def test_a_reload_of_the_same_rows_changes_nothing() -> None:
    d = reload(ROWS, list(ROWS))
    assert d is not None and not d


def test_a_reload_updates_changed_rows_in_place() -> None:
    fresh = [Row("e", 5), Row("d", 4, "done"), Row("c", 3), Row("b", 2, "failed")]
    d = reload(ROWS, fresh)
    assert d is not None and d.removals == [] and d.inserts == []
    assert d.updates == [(1, Row("d", 4, "done")), (3, Row("b", 2, "failed"))]


def test_a_reload_removes_gone_rows_and_inserts_new_ones() -> None:
    fresh = [Row("g", 7), Row("f", 6), Row("e", 5), Row("c", 3), Row("a", 1)]
    d = reload(ROWS, fresh)
    assert d is not None
    assert d.removals == [3, 1] and d.updates == []
    assert d.inserts == [(2, [Row("a", 1)]), (0, [Row("g", 7), Row("f", 6)])]
    assert apply(ROWS, d) == fresh


def test_rows_past_the_fresh_page_go_as_on_a_reset() -> None:
    d = reload(ROWS, ROWS[:2])
    assert d is not None and d.removals == [3, 2] and apply(ROWS, d) == ROWS[:2]
    d = reload([], ROWS)
    assert d is not None and d.inserts == [(0, ROWS)] and apply([], d) == ROWS


def test_rows_that_changed_their_order_mean_a_reset() -> None:
    assert reload(ROWS, [Row("d", 4), Row("e", 5), Row("c", 3), Row("b", 2)]) is None


def test_a_reload_diff_always_gives_the_fresh_page() -> None:
    rng = random.Random(11)
    for _ in range(300):
        keys = rng.sample("abcdefghijklmnop", rng.randint(0, 10))
        rows = [Row(k, i) for i, k in enumerate(keys)]
        kept = [r for r in rows if rng.random() < 0.7]
        fresh = [Row(r.key, r.rank, rng.choice(["", "x"])) for r in kept]
        for k in rng.sample([c for c in "qrstuvwxyz"], rng.randint(0, 4)):
            fresh.insert(rng.randint(0, len(fresh)), Row(k, 0))
        d = reload(rows, fresh)
        assert d is not None and apply(rows, d) == fresh

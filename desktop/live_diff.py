"""The live-update diff of a sorted, partly loaded list: which rows leave, which change in place,
and where new ones go. Pure Python, no Qt: the paged table models apply its result with row-level
model signals (napari's models apply their list's events the same way), and it is tested alone.

A row whose sort key changed moves: it is removed, then inserted at its new place.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

R = TypeVar("R")


@dataclass(frozen=True)
class Diff(Generic[R]):
    """Steps to apply in this order: remove, update, insert."""

    removals: list[int] = field(default_factory=list)  # positions in the old list, highest first
    updates: list[tuple[int, R]] = field(default_factory=list)  # positions after the removals
    inserts: list[tuple[int, list[R]]] = field(default_factory=list)  # blocks, highest position first

    def __bool__(self) -> bool:
        return bool(self.removals or self.updates or self.inserts)


def insert_position(rows: Sequence[R], row: R, sort_key: Callable[[R], Any], *, descending: bool,
                    has_more: bool) -> int | None:
    """Where `row` goes among the sorted `rows` (binary search), or None past the loaded end
    while more rows wait on the server (it comes with a later page)."""
    new_key = sort_key(row)
    lo, hi = 0, len(rows)
    while lo < hi:
        mid = (lo + hi) // 2
        key = sort_key(rows[mid])
        if (new_key > key) if descending else (new_key < key):
            hi = mid
        else:
            lo = mid + 1
    if lo == len(rows) and has_more:
        return None
    return lo


def diff_rows(rows: Sequence[R], changed: Collection[str], fresh: Mapping[str, R], *,
              key: Callable[[R], str], sort_key: Callable[[R], Any], descending: bool = True,
              matches: Callable[[R], bool] = lambda _row: True, has_more: bool = False) -> Diff[R]:
    """How to bring `rows` (sorted by `sort_key`) up to date after the rows with keys `changed`
    changed; `fresh` holds their current versions (a key missing from it was deleted)."""
    index = {key(r): i for i, r in enumerate(rows)}
    current = {k: r for k, r in fresh.items() if matches(r)}
    moved = {k for k, r in current.items() if k in index and sort_key(rows[index[k]]) != sort_key(r)}
    removals = sorted((index[k] for k in changed if k in index and (k not in current or k in moved)), reverse=True)
    kept = [r for i, r in enumerate(rows) if i not in set(removals)]
    kept_index = {key(r): i for i, r in enumerate(kept)}
    updates = sorted((kept_index[k], r) for k, r in current.items() if k in kept_index)
    groups: dict[int, list[R]] = {}
    for k, r in current.items():
        if k in kept_index:
            continue
        at = insert_position(kept, r, sort_key, descending=descending, has_more=has_more)
        if at is not None:
            groups.setdefault(at, []).append(r)
    inserts = [(at, sorted(groups[at], key=sort_key, reverse=descending)) for at in sorted(groups, reverse=True)]
    return Diff(removals, updates, inserts)


def apply(rows: list[R], diff: Diff[R]) -> list[R]:
    """The list after the diff (what a model's rows become)."""
    out = list(rows)
    for position in diff.removals:
        del out[position]
    for position, row in diff.updates:
        out[position] = row
    for position, block in diff.inserts:
        out[position:position] = block
    return out


def reload_diff(rows: Sequence[R], fresh: Sequence[R], *, key: Callable[[R], str]) -> Diff[R] | None:
    """How to turn the shown `rows` into a freshly loaded first page `fresh` with row-level
    steps, so that a reload that brings (nearly) the same rows repaints only what changed and
    keeps the selection; None when the rows that stay changed their order (reset instead).

    Rows past `fresh` go, as a reset would drop them: the reload starts from the first page
    (and reloads as many rows as were shown, up to a cap: `jobdesk.console.table_model.RELOAD_DEPTH`)."""
    fresh_keys = {key(r): r for r in fresh}
    removals = sorted((i for i, r in enumerate(rows) if key(r) not in fresh_keys), reverse=True)
    gone = set(removals)
    kept = [r for i, r in enumerate(rows) if i not in gone]
    kept_keys = {key(r) for r in kept}
    if [key(r) for r in kept] != [k for k in fresh_keys if k in kept_keys]:
        return None
    updates = [(i, fresh_keys[key(old)]) for i, old in enumerate(kept) if old != fresh_keys[key(old)]]
    groups: dict[int, list[R]] = {}
    at = 0  # how many kept rows come before this one in `fresh`
    for r in fresh:
        if key(r) in kept_keys:
            at += 1
        else:
            groups.setdefault(at, []).append(r)
    inserts = [(position, groups[position]) for position in sorted(groups, reverse=True)]
    return Diff(removals, updates, inserts)

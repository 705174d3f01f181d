"""Table models of the console's lists.

`RowsTableModel` is a list of rows under fixed headers: the workers panel uses it as it is.
`PagedTableModel` adds rows the server sends a page at a time, which the job table and the
pipeline list share: subclasses say how to fetch a page and what identifies a row; it loads the
first page on `reload` (a refresh of the same query as many pages as were shown, up to
`RELOAD_DEPTH` rows), the next ones as the view scrolls (`fetchMore`), and drops the answer of a
load that a newer one overtook."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import UTC, datetime
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, Signal

from jobdesk.console.live_diff import Diff, reload_diff
from jobdesk.console.tasks import spawn
from jobdesk.service.jobs import JobService

Index = QModelIndex | QPersistentModelIndex
# Runs `fn(service)` with the console's JobService (`ConsoleConnection.run`).
RELOAD_DEPTH = 2_000  # rows a refresh reloads at most, a page at a time, to keep what was scrolled to
Query = Callable[[Callable[[JobService], Awaitable[Any]]], Awaitable[Any]]


class RowsTableModel(QAbstractTableModel):
    headers: Sequence[str] = ()

    def __init__(self) -> None:
        super().__init__()
        self._rows: list[Any] = []

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(self.headers)

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802
                   role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole \
                and 0 <= section < len(self.headers):
            return self.headers[section]
        return None

    def row_at(self, row: int) -> Any | None:  # noqa: ANN401 - a row is each subclass's record type
        return self._rows[row] if 0 <= row < len(self._rows) else None

    def apply_diff(self, diff: Diff[Any]) -> None:
        """Apply a live-update diff with row-level signals: removals, in-place updates, inserts."""
        for first, last in _runs(diff.removals):
            self.beginRemoveRows(QModelIndex(), first, last)
            del self._rows[first:last + 1]
            self.endRemoveRows()
        if diff.removals:
            self._reindexed(0)
        last_column = max(0, self.columnCount() - 1)
        for position, row in diff.updates:
            self._rows[position] = row
            self.dataChanged.emit(self.index(position, 0), self.index(position, last_column))
        for position, block in diff.inserts:
            self.beginInsertRows(QModelIndex(), position, position + len(block) - 1)
            self._rows[position:position] = block
            self.endInsertRows()
        if diff.inserts:
            self._reindexed(min(position for position, _ in diff.inserts))

    def _reindexed(self, start: int) -> None:
        """Rows from `start` on moved (a keyed subclass updates its index)."""


class PagedTableModel(RowsTableModel):
    loaded = Signal()  # a page or a refresh arrived
    failed = Signal(str)  # a query failed; the message says why

    task_name = "table-load"

    def __init__(self, query: Query) -> None:
        super().__init__()
        self._query = query
        self._index: dict[str, int] = {}  # row key -> position
        self._has_more = False
        self._loading: asyncio.Task[None] | None = None
        self._generation = 0  # bumped by every reload; older answers are dropped
        self._reset_pending = False  # a reload for a new query is under way: its answer resets the model
        self.active = False  # set once connected; queries wait until then
        self.now = datetime.now(UTC)

    # -- what a subclass says ---------------------------------------------------------------

    def row_key(self, row: Any) -> str:  # noqa: ANN401 - a row is each subclass's record type
        raise NotImplementedError

    async def fetch(self, after: Any | None) -> tuple[list[Any], bool]:  # noqa: ANN401 - a subclass's rows
        """The page after row `after` (the first page for None), and whether more follow."""
        raise NotImplementedError

    # -- Qt model API -----------------------------------------------------------------------

    def canFetchMore(self, parent: Index = QModelIndex()) -> bool:  # noqa: B008, N802
        return not parent.isValid() and self.active and self._has_more and self._loading is None

    def fetchMore(self, parent: Index = QModelIndex()) -> None:  # noqa: B008, N802
        if self.canFetchMore(parent) and self._rows:
            self._start(self._load(self._rows[-1]))

    # -- rows -------------------------------------------------------------------------------

    def row_of(self, key: str) -> int | None:
        return self._index.get(key)

    def reload(self, *, new_query: bool = False) -> None:
        """Start again from the first page (once connected). A refresh of the same query applies
        the fresh page row by row (see `reload_diff`); a `new_query` resets the model."""
        if not self.active:
            return
        self._generation += 1
        if self._loading is not None:
            self._loading.cancel()
            self._loading = None
        self._reset_pending = self._reset_pending or new_query  # kept if a newer refresh overtakes it
        self._start(self._load(None, reset=self._reset_pending))

    def _start(self, coro: Coroutine[Any, Any, None]) -> None:
        task = spawn(coro, self.task_name)
        if task is None:
            return
        self._loading = task

        def done(t: asyncio.Task[None]) -> None:
            if self._loading is t:
                self._loading = None
            if not t.cancelled() and t.exception() is not None:
                self.failed.emit(str(t.exception()))

        task.add_done_callback(done)

    async def _load(self, after: Any | None, *, reset: bool = False) -> None:  # noqa: ANN401 - a subclass's row
        generation = self._generation
        rows, has_more = await self.fetch(after)
        if after is None and not reset:
            # A refresh of the same query (a live reload, Refresh) reloads as deep as the table
            # was scrolled, up to a cap, so that the rows past the first page and the place of
            # someone reading them stay.
            shown = min(len(self._rows), RELOAD_DEPTH)
            while has_more and rows and len(rows) < shown and generation == self._generation:
                more, has_more = await self.fetch(rows[-1])
                rows = [*rows, *more]
        if generation != self._generation:
            return
        self.now = datetime.now(UTC)
        if after is None:
            self._reset_pending = False
        diff = None if after is not None or reset else reload_diff(self._rows, rows, key=self.row_key)
        if diff is not None:
            # A refresh that brings (nearly) the same page: a reset would repaint the whole
            # table and drop the selection on every live reload.
            self.apply_diff(diff)
        elif after is None:
            self.beginResetModel()
            self._rows = list(rows)
            self._reindex()
            self.endResetModel()
        else:
            fresh = [r for r in rows if self.row_key(r) not in self._index]
            if fresh:
                first = len(self._rows)
                self.beginInsertRows(QModelIndex(), first, first + len(fresh) - 1)
                self._rows.extend(fresh)
                self._reindex(first)
                self.endInsertRows()
        self._has_more = has_more
        self.loaded.emit()

    def _reindexed(self, start: int) -> None:
        self._reindex(start)

    def _reindex(self, start: int = 0) -> None:
        if start == 0:
            self._index = {}
        for i in range(start, len(self._rows)):
            self._index[self.row_key(self._rows[i])] = i


def _runs(positions: list[int]) -> list[tuple[int, int]]:
    """Positions (highest first) as runs of neighbours (first, last), highest run first."""
    runs: list[tuple[int, int]] = []
    for p in positions:
        if runs and runs[-1][0] == p + 1:
            runs[-1] = (p, runs[-1][1])
        else:
            runs.append((p, p))
    return runs

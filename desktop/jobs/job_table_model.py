"""The live job table: a lazily paged Qt model over `worker.job_queries`.

Rows arrive a page at a time as the user scrolls (keyset pagination on the server), and pushed
changes update single rows in place (`dataChanged`), insert new ones at the top, or drop rows
that no longer match the filter, without resetting the view.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, Signal

from desktop.tasks import spawn
from desktop.theme import status_label
from worker.job_queries import JobFilter, JobRow, Page, fetch_page, fetch_rows
from worker.models import Status, short_id
from worker.timefmt import relative, span

log = logging.getLogger("jobdesk.console")

PAGE_SIZE = 200
ROW_ROLE = Qt.ItemDataRole.UserRole + 1  # the JobRow of a row

# (header, sort key or None)
COLUMNS: list[tuple[str, str | None]] = [
    ("ID", "created"), ("Type", "type"), ("Status", "status"), ("Pipeline", "pipeline"), ("User", "user"),
    ("Tries", "attempts"), ("Created", "created"), ("Updated", "updated"), ("Duration", None),
    ("Next retry", None), ("Error", None),
]
COL_ID, COL_TYPE, COL_STATUS, COL_PIPELINE, COL_USER, COL_TRIES, COL_CREATED, COL_UPDATED, COL_DURATION, \
    COL_RETRY, COL_ERROR = range(len(COLUMNS))

Index = QModelIndex | QPersistentModelIndex
Fetcher = Callable[[Callable[[Any], Awaitable[Any]]], Awaitable[Any]]


def duration(row: JobRow, now: datetime) -> str:
    if row.started_at is None:
        return ""
    end = row.completed_at or (now if row.status == Status.IN_PROGRESS else row.updated_at)
    return span(max(0.0, (end - row.started_at).total_seconds()))


class JobTableModel(QAbstractTableModel):
    """Rows of jobs matching a filter, in server order, fetched as needed."""

    loaded = Signal()  # a page or a refresh arrived
    failed = Signal(str)  # a query failed; the message says why

    def __init__(self, run: Fetcher) -> None:
        super().__init__()
        self._run = run  # runs a coroutine function against the database connection
        self._rows: list[JobRow] = []
        self._index: dict[str, int] = {}
        self.filter = JobFilter()
        self.sort_key = "created"
        self.descending = True
        self._has_more = False
        self._loading: asyncio.Task[None] | None = None
        self._generation = 0
        self.active = False  # set once connected; queries wait until then
        self.now = datetime.now(UTC)

    # -- Qt model API -----------------------------------------------------------------------

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        horizontal = orientation == Qt.Orientation.Horizontal
        if horizontal and role == Qt.ItemDataRole.DisplayRole and 0 <= section < len(COLUMNS):
            return COLUMNS[section][0]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        row = self._rows[index.row()]
        col = index.column()
        if role == ROW_ROLE:
            return row
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(row, col)
        if role == Qt.ItemDataRole.ToolTipRole:
            if col == COL_ID:
                return row.id
            if col in (COL_CREATED, COL_UPDATED):
                when = row.created_at if col == COL_CREATED else row.updated_at
                return when.astimezone().strftime("%Y-%m-%d %H:%M:%S")
            if col == COL_ERROR:
                return row.error_line
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (COL_TRIES, COL_USER, COL_DURATION):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def _display(self, row: JobRow, col: int) -> str:
        if col == COL_ID:
            return short_id(row.id)
        if col == COL_TYPE:
            return row.type
        if col == COL_STATUS:
            return status_label(row.status, symbol=False)
        if col == COL_PIPELINE:
            return short_id(row.pipeline_id)
        if col == COL_USER:
            return "" if row.user_id is None else str(row.user_id)
        if col == COL_TRIES:
            return str(row.attempts)
        if col == COL_CREATED:
            return relative(row.created_at, self.now)
        if col == COL_UPDATED:
            return relative(row.updated_at, self.now)
        if col == COL_DURATION:
            return duration(row, self.now)
        if col == COL_RETRY:
            if row.status == Status.QUEUED and row.next_retry_at and row.next_retry_at > self.now:
                return f"{(row.next_retry_at - self.now).total_seconds():.0f}s"
            return ""
        if col == COL_ERROR:
            return row.error_line or ""
        return ""

    def canFetchMore(self, parent: Index = QModelIndex()) -> bool:  # noqa: B008, N802
        return not parent.isValid() and self.active and self._has_more and self._loading is None

    def fetchMore(self, parent: Index = QModelIndex()) -> None:  # noqa: B008, N802
        if self.canFetchMore(parent):
            self._start(self._load_next())

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:  # type: ignore[override]
        key = COLUMNS[column][1] if 0 <= column < len(COLUMNS) else None
        if key is None:
            return
        self.set_query(self.filter, key, order == Qt.SortOrder.DescendingOrder)

    # -- loading ----------------------------------------------------------------------------

    def row_at(self, row: int) -> JobRow | None:
        return self._rows[row] if 0 <= row < len(self._rows) else None

    def row_of(self, job_id: str) -> int | None:
        return self._index.get(job_id)

    def set_query(self, filt: JobFilter, sort: str | None = None, descending: bool | None = None) -> None:
        """Show jobs matching `filt` in the given order, from the first page."""
        self.filter = filt
        self.sort_key = sort or self.sort_key
        self.descending = self.descending if descending is None else descending
        self.reload()

    def reload(self) -> None:
        if not self.active:
            return
        self._generation += 1
        if self._loading is not None:
            self._loading.cancel()
            self._loading = None
        self._start(self._load_first())

    def _start(self, coro: Coroutine[Any, Any, None]) -> None:
        task = spawn(coro, "job-table-load")
        if task is None:
            return
        self._loading = task

        def done(t: asyncio.Task[None]) -> None:
            if self._loading is t:
                self._loading = None
            if not t.cancelled() and t.exception() is not None:
                self.failed.emit(str(t.exception()))

        task.add_done_callback(done)

    async def _page(self, after: tuple[Any, int] | None) -> Page:
        filt, sort, desc = self.filter, self.sort_key, self.descending
        return await self._run(lambda c: _with_conn(c, lambda conn: fetch_page(
            conn, filt, sort=sort, descending=desc, after=after, limit=PAGE_SIZE)))

    async def _load_first(self) -> None:
        generation = self._generation
        page = await self._page(None)
        if generation != self._generation:
            return
        self.now = datetime.now(UTC)
        self.beginResetModel()
        self._rows = list(page.rows)
        self._reindex()
        self._has_more = page.has_more
        self.endResetModel()
        self.loaded.emit()

    async def _load_next(self) -> None:
        generation = self._generation
        if not self._rows:
            return
        page = await self._page(self._rows[-1].keyset(self.sort_key))
        if generation != self._generation:
            return
        fresh = [r for r in page.rows if r.id not in self._index]
        if fresh:
            first = len(self._rows)
            self.beginInsertRows(QModelIndex(), first, first + len(fresh) - 1)
            self._rows.extend(fresh)
            self._reindex(first)
            self.endInsertRows()
        self._has_more = page.has_more
        self.loaded.emit()

    def _reindex(self, start: int = 0) -> None:
        if start == 0:
            self._index = {}
        for i in range(start, len(self._rows)):
            self._index[self._rows[i].id] = i

    # -- live updates -----------------------------------------------------------------------

    async def apply_changes(self, job_ids: set[str]) -> None:
        """Fetch just these rows and update the model row by row."""
        generation = self._generation
        rows = await self._run(lambda c: _with_conn(c, lambda conn: fetch_rows(conn, sorted(job_ids))))
        if generation != self._generation:
            return
        self.now = datetime.now(UTC)
        found = {r.id: r for r in rows}
        matching = {i: r for i, r in found.items() if self._matches(r)}
        # Rows whose sort key changed (sorted by status or by update time, say) move: out here,
        # back in below at their new place.
        moved = {i for i, r in matching.items()
                 if i in self._index and self._sort_key(self._rows[self._index[i]]) != self._sort_key(r)}
        # Rows that vanished or stopped matching the filter leave the table.
        gone = sorted((self._index[i] for i in job_ids if i in self._index and (i not in matching or i in moved)),
                      reverse=True)
        for position in gone:
            self.beginRemoveRows(QModelIndex(), position, position)
            del self._rows[position]
            self.endRemoveRows()
        if gone:
            self._reindex()
        # Rows still shown are updated in place.
        for job_id, row in matching.items():
            shown_at = self._index.get(job_id)
            if shown_at is not None:
                self._rows[shown_at] = row
                self.dataChanged.emit(self.index(shown_at, 0), self.index(shown_at, len(COLUMNS) - 1))
        # New rows go where the sort order puts them within the loaded range, one block insert
        # per gap, so a burst of new jobs at the top costs one model update, not one per row.
        new = [r for i, r in matching.items() if i not in self._index]
        groups: dict[int, list[JobRow]] = {}
        for row in new:
            at = self._insert_position(row)
            if at is not None:  # else: beyond what is loaded; it comes with a later page
                groups.setdefault(at, []).append(row)
        for at in sorted(groups, reverse=True):
            block = sorted(groups[at], key=self._sort_key, reverse=self.descending)
            self.beginInsertRows(QModelIndex(), at, at + len(block) - 1)
            self._rows[at:at] = block
            self.endInsertRows()
        if groups:
            self._reindex(min(groups))
        self.loaded.emit()

    def _matches(self, row: JobRow) -> bool:
        f = self.filter
        if f.statuses and row.status not in f.statuses:
            return False
        if f.type and row.type != f.type:
            return False
        if f.pipeline_id and row.pipeline_id != f.pipeline_id:
            return False
        if f.user_id is not None and row.user_id != f.user_id:
            return False
        if f.created_from and row.created_at < f.created_from:
            return False
        if f.created_to and row.created_at >= f.created_to:
            return False
        if f.search:
            needle = f.search.strip().lower()
            if needle not in row.id.lower() and needle not in row.type.lower() and \
                    needle not in (row.error_line or "").lower():
                return False  # input_data is not in the row; the next reload settles it
        return True

    def _sort_key(self, row: JobRow) -> tuple[Any, ...]:
        value, seq = row.keyset(self.sort_key)
        key = (value is not None, value if value is not None else 0, seq)
        return key

    def _insert_position(self, row: JobRow) -> int | None:
        """Where `row` goes among the loaded rows (binary search), or None past the loaded end."""
        new_key = self._sort_key(row)
        lo, hi = 0, len(self._rows)
        while lo < hi:
            mid = (lo + hi) // 2
            key = self._sort_key(self._rows[mid])
            if (new_key > key) if self.descending else (new_key < key):
                hi = mid
            else:
                lo = mid + 1
        if lo == len(self._rows) and self._has_more:
            return None
        return lo


async def _with_conn(client: Any, fn: Callable[[Any], Awaitable[Any]]) -> Any:
    async with client.pool.acquire() as conn:
        return await fn(conn)

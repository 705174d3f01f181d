"""The live job table: a lazily paged Qt model over `worker.job_queries`.

Rows arrive a page at a time as the user scrolls (keyset pagination on the server), and pushed
changes update single rows in place (`dataChanged`), insert new ones at the top, or drop rows
that no longer match the filter, without resetting the view.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

from PySide6.QtCore import Qt

from jobdesk.console.live_diff import diff_rows, reload_diff
from jobdesk.console.table_model import Index, PagedTableModel, Query
from jobdesk.console.theme import status_label
from jobdesk.core.job_report import JobProgress
from jobdesk.core.models import Status, short_id
from jobdesk.core.timefmt import relative, span, until
from jobdesk.service.jobs import JobService
from jobdesk.store.jobs import MAX_YEAR, JobFilter, JobRow, Page, glob_matches

log = logging.getLogger("jobdesk.console")

PAGE_SIZE = 200
ROW_ROLE = Qt.ItemDataRole.UserRole + 1  # the JobRow of a row
PROGRESS_ROLE = Qt.ItemDataRole.UserRole + 8  # the JobProgress of a row, None if it reported none
SERVED_ROLES = frozenset({ROW_ROLE, PROGRESS_ROLE, Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole,
                          Qt.ItemDataRole.TextAlignmentRole})

# (header, sort key or None)
COLUMNS: list[tuple[str, str | None]] = [
    ("ID", "created"), ("Type", "type"), ("Status", "status"), ("Progress", None), ("Pipeline", "pipeline"),
    ("User", "user"), ("Runs", "attempts"), ("Created", "created"), ("Updated", "updated"), ("Duration", None),
    ("Next retry", None), ("Error", None),
]
COL_ID, COL_TYPE, COL_STATUS, COL_PROGRESS, COL_PIPELINE, COL_USER, COL_TRIES, COL_CREATED, COL_UPDATED, \
    COL_DURATION, COL_RETRY, COL_ERROR = range(len(COLUMNS))


def duration(row: JobRow, now: datetime) -> str:
    if row.started_at is None:
        return ""
    end = row.completed_at or (now if row.status == Status.IN_PROGRESS else row.updated_at)
    return span(max(0.0, (end - row.started_at).total_seconds()))


class JobTableModel(PagedTableModel):
    """Rows of jobs matching a filter, in server order, fetched as needed."""

    headers = [header for header, _key in COLUMNS]
    task_name = "job-table-load"

    def __init__(self, query: Query) -> None:
        super().__init__(query)
        self._rows: list[JobRow] = []
        self.progress: dict[str, JobProgress] = {}  # the last progress of the rows that reported any
        self.filter = JobFilter()
        self.sort_key = "created"
        self.descending = True
        self.head_read_at = 0.0  # time.monotonic() of the last head read that changed the rows

    def row_key(self, row: JobRow) -> str:
        return row.id

    async def fetch(self, after: JobRow | None, *, limit: int = PAGE_SIZE) -> tuple[list[JobRow], bool]:
        filt, sort, desc = self.filter, self.sort_key, self.descending
        keyset = after.keyset(sort) if after is not None else None

        async def read(jobs: JobService) -> tuple[Page, dict[str, JobProgress]]:
            page = await jobs.job_page(filt, sort=sort, descending=desc, after=keyset, limit=limit)
            return page, await jobs.job_progress([r.id for r in page.rows if r.started_at is not None])

        page, progress = await self._query(read)
        self._set_progress([r.id for r in page.rows], progress)
        return page.rows, page.has_more

    def _set_progress(self, ids: list[str], found: dict[str, JobProgress]) -> None:
        """Take the progress read for these rows (missing: none); repaint the rows shown whose
        progress changed (their row may not have: a progress is not a change of the job's row)."""
        for job_id in ids:
            now = found.get(job_id)
            if self.progress.get(job_id) == now:
                continue
            if now is None:
                del self.progress[job_id]
            else:
                self.progress[job_id] = now
            position = self.row_of(job_id)
            if position is not None:
                cell = self.index(position, COL_PROGRESS)
                self.dataChanged.emit(cell, cell)

    # -- Qt model API -----------------------------------------------------------------------

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if role not in SERVED_ROLES:  # the view asks each cell for many roles on every paint
            return None
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        row = self._rows[index.row()]
        col = index.column()
        if role == ROW_ROLE:
            return row
        if role == PROGRESS_ROLE:
            return self.progress.get(row.id)
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
            if col == COL_PROGRESS and row.id in self.progress:
                return self.progress[row.id].message
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (COL_TRIES, COL_USER, COL_DURATION):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def _display(self, row: JobRow, col: int) -> str:
        if col == COL_ID:
            return short_id(row.id)
        if col == COL_TYPE:
            return row.type
        if col == COL_PROGRESS:
            progress = self.progress.get(row.id)
            return "" if progress is None else f"{progress.fraction * 100:.0f}%"
        if col == COL_STATUS:
            if row.status == Status.QUEUED and row.scheduled_at and row.scheduled_at > self.now:
                return f"scheduled · {until(row.scheduled_at, self.now)}"
            if row.suspended and row.run_at is not None:
                return ("suspended" if row.run_at.year >= MAX_YEAR
                        else f"suspended · {until(row.run_at, self.now)}")
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

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:  # type: ignore[override]
        key = COLUMNS[column][1] if 0 <= column < len(COLUMNS) else None
        if key is None:
            return
        self.set_query(self.filter, key, order == Qt.SortOrder.DescendingOrder)

    # -- loading ----------------------------------------------------------------------------

    def set_query(self, filt: JobFilter, sort: str | None = None, descending: bool | None = None) -> None:
        """Show jobs matching `filt` in the given order, from the first page."""
        self.filter = filt
        self.sort_key = sort or self.sort_key
        self.descending = self.descending if descending is None else descending
        self.reload(new_query=True)

    # -- live updates -----------------------------------------------------------------------

    async def refresh_head(self, limit: int) -> None:
        """Read the first `limit` rows again (those on screen, and a margin) and apply them row by
        row. Rows past them go, and come back a page at a time as the view scrolls: a live table
        at the top holds what it shows, however many jobs arrive above it."""
        if not self.active:
            return
        generation = self._generation
        rows, has_more = await self.fetch(None, limit=limit)
        if generation != self._generation or self._loading is not None:
            return  # a reload, a new query or a page overtook this read; the next change reads again
        self.now = datetime.now(UTC)
        diff = reload_diff(self._rows, rows, key=self.row_key)
        if diff is None:
            self.beginResetModel()
            self._rows = list(rows)
            self._reindex()
            self.endResetModel()
        else:
            self.apply_diff(diff)
        if diff is None or diff:
            self.head_read_at = time.monotonic()  # the rows on screen were redrawn at `now`
        self._has_more = has_more
        self.loaded.emit()

    async def apply_changes(self, job_ids: set[str]) -> None:
        """Fetch just these rows and update the model row by row."""
        generation = self._generation
        wanted = sorted(job_ids)

        async def read(jobs: JobService) -> tuple[list[JobRow], dict[str, JobProgress]]:
            return await jobs.job_rows(wanted), await jobs.job_progress(wanted)

        rows, progress = await self._query(read)
        if generation != self._generation:
            return
        self._set_progress(wanted, progress)
        self.now = datetime.now(UTC)
        self.apply_diff(diff_rows(self._rows, job_ids, {r.id: r for r in rows}, key=self.row_key,
                                  sort_key=self._sort_key, descending=self.descending, matches=self._matches,
                                  has_more=self._has_more))
        self.loaded.emit()

    def _matches(self, row: JobRow) -> bool:
        f = self.filter
        if f.statuses and row.status not in f.statuses:
            return False
        if f.type and row.type != f.type:
            return False
        if f.type_pattern and not glob_matches(f.type_pattern, row.type):
            return False
        if f.error and f.error.strip().lower() not in (row.error_line or "").lower():
            return False  # only the first line is in the row; the next reload settles it
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

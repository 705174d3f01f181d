"""The live pipeline list: a lazily paged Qt model over `worker.pipeline_queries`, newest first.

Pushed job changes are mapped to their pipelines, and only those rows are re-read: updated in
place, inserted at their place, or dropped when they stop matching the filter.
"""

from __future__ import annotations

from datetime import UTC, datetime

from PySide6.QtCore import Qt

from jobdesk.console.live_diff import diff_rows
from jobdesk.console.table_model import Index, PagedTableModel, Query
from jobdesk.core.models import short_id
from jobdesk.core.timefmt import relative, span
from jobdesk.store.pipelines import (
    PipelineFilter,
    PipelineRow,
    PipelineStatus,
)

PAGE_SIZE = 200
ROW_ROLE = Qt.ItemDataRole.UserRole + 1
COLUMNS = ["Pipeline", "Status", "Progress", "Started", "Duration", "ID"]
COL_NAME, COL_STATUS, COL_PROGRESS, COL_STARTED, COL_DURATION, COL_ID = range(len(COLUMNS))

PIPELINE_SYMBOLS = {
    PipelineStatus.RUNNING: "▶", PipelineStatus.WAITING_APPROVAL: "⚑", PipelineStatus.FAILED: "✖",
    PipelineStatus.CANCELLED: "⊘", PipelineStatus.COMPLETED: "✔",
}



def pipeline_label(status: PipelineStatus, *, symbol: bool = True) -> str:
    text = status.value.replace("_", " ")
    return f"{PIPELINE_SYMBOLS[status]} {text}" if symbol else text


class PipelineListModel(PagedTableModel):
    headers = COLUMNS
    task_name = "pipeline-list-load"

    def __init__(self, query: Query) -> None:
        super().__init__(query)
        self._rows: list[PipelineRow] = []
        self.filter = PipelineFilter()

    def row_key(self, row: PipelineRow) -> str:
        return row.pipeline_id

    async def fetch(self, after: PipelineRow | None) -> tuple[list[PipelineRow], bool]:
        filt, after_seq = self.filter, after.head_seq if after is not None else None
        rows, has_more = await self._query(lambda jobs: jobs.pipelines(filt, after_seq=after_seq, limit=PAGE_SIZE))
        return rows, has_more

    # -- Qt model API -----------------------------------------------------------------------

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        row, col = self._rows[index.row()], index.column()
        if role == ROW_ROLE:
            return row
        if role == Qt.ItemDataRole.DisplayRole:
            if col == COL_NAME:
                return row.name
            if col == COL_STATUS:
                return pipeline_label(row.status)
            if col == COL_PROGRESS:
                return f"{row.completed} of {row.total}"
            if col == COL_STARTED:
                return relative(row.started_at, self.now)
            if col == COL_DURATION:
                return span(row.duration_s(self.now))
            if col == COL_ID:
                return short_id(row.pipeline_id)
        if role == Qt.ItemDataRole.ToolTipRole:
            if col == COL_ID or col == COL_NAME:
                return row.pipeline_id
            if col == COL_STARTED:
                return row.started_at.astimezone().strftime("%Y-%m-%d %H:%M:%S")
            if col == COL_PROGRESS:
                parts = [f"{n} {what}" for n, what in ((row.in_progress, "running"), (row.queued, "queued"),
                                                        (row.waiting, "waiting approval"), (row.failed, "failed"),
                                                        (row.cancelled, "cancelled")) if n]
                return ", ".join(parts) or "all completed"
        if role == Qt.ItemDataRole.TextAlignmentRole and col == COL_DURATION:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def set_filter(self, filt: PipelineFilter) -> None:
        self.filter = filt
        self.reload(new_query=True)

    # -- live updates -----------------------------------------------------------------------

    async def apply_changes(self, job_ids: set[str]) -> set[str]:
        """Re-read the pipelines these jobs belong to; return those pipeline ids."""
        generation, filt = self._generation, self.filter

        pipeline_ids, rows = await self._query(lambda jobs: jobs.pipeline_changes(job_ids, filt))
        if generation != self._generation:
            return pipeline_ids
        self.now = datetime.now(UTC)
        self.apply_diff(diff_rows(self._rows, pipeline_ids, {r.pipeline_id: r for r in rows}, key=self.row_key,
                                  sort_key=lambda r: r.head_seq, descending=True, has_more=self._has_more))
        self.loaded.emit()
        return pipeline_ids

    def tick(self) -> None:
        """Refresh the live ages and durations."""
        self.now = datetime.now(UTC)
        if self._rows:
            self.dataChanged.emit(self.index(0, COL_STARTED), self.index(len(self._rows) - 1, COL_DURATION),
                                  [Qt.ItemDataRole.DisplayRole])


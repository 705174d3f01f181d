"""Rows of the Schedules tab: every schedule, by name, with its expression in words and its recent
runs (drawn by `sparklines.RunsDelegate`), and the ticks of the selected one."""

from __future__ import annotations

from datetime import UTC, datetime

from PySide6.QtCore import Qt

from jobdesk.console.jobs.status_delegate import STATUS_ROLE
from jobdesk.console.live_diff import diff_rows
from jobdesk.console.sparklines import GLANCE_ROLE
from jobdesk.console.table_model import Index, RowsTableModel
from jobdesk.core.models import short_id
from jobdesk.core.timefmt import relative
from jobdesk.runtime.scheduler import ScheduledJob, ScheduleRecord

COLUMNS = ["Name", "When", "Timezone", "Type", "Next run", "Last run", "State", "Description", "Recent runs"]
(COL_NAME, COL_WHEN, COL_ZONE, COL_TYPE, COL_NEXT, COL_LAST, COL_STATE, COL_DESCRIPTION,
 COL_RECENT) = range(len(COLUMNS))
TICK_COLUMNS = ["Tick", "Job", "Status"]
TICK_COL_STATUS = 2


def recent_text(record: ScheduleRecord) -> str:
    """`20 runs: 18 completed, 2 failed`, or `no runs yet`."""
    runs = record.recent
    if not runs:
        return "no runs yet"
    counts: dict[str, int] = {}
    for run in runs:
        key = run.status or "deleted"
        counts[key] = counts.get(key, 0) + 1
    said = ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return f"{len(runs)} run{'s' if len(runs) != 1 else ''}: {said}"


def _when(at: datetime | None, now: datetime) -> str:
    if at is None:
        return "—"
    local = at.astimezone()
    shown = f"{local:%H:%M:%S}" if local.date() == now.astimezone().date() else f"{local:%b %d %H:%M}"
    return f"{shown} ({relative(at, now)})"


class ScheduleTableModel(RowsTableModel):
    headers = COLUMNS

    def __init__(self) -> None:
        super().__init__()
        self._rows: list[ScheduleRecord] = []
        self.now = datetime.now(UTC)

    def row_of(self, name: str) -> int | None:
        return next((i for i, r in enumerate(self._rows) if r.schedule.name == name), None)

    def set_schedules(self, records: list[ScheduleRecord]) -> None:
        """Show a new read, row by row, so that the selection stays on its schedule."""
        self.now = datetime.now(UTC)
        old = {r.schedule.name for r in self._rows}
        fresh = {r.schedule.name: r for r in records}
        self.apply_diff(diff_rows(self._rows, old | set(fresh), fresh, key=lambda r: r.schedule.name,
                                  sort_key=lambda r: r.schedule.name, descending=False))

    def tick(self) -> None:
        self.now = datetime.now(UTC)
        if self._rows:
            self.dataChanged.emit(self.index(0, COL_NEXT), self.index(len(self._rows) - 1, COL_LAST),
                                  [Qt.ItemDataRole.DisplayRole])

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        record = self.row_at(index.row()) if index.isValid() else None
        if record is None:
            return None
        if index.column() == COL_RECENT and role == GLANCE_ROLE:
            return [(run.status, run.duration_s) for run in record.recent]
        if index.column() in (COL_RECENT, COL_DESCRIPTION) and role == Qt.ItemDataRole.ToolTipRole:
            return recent_text(record) if index.column() == COL_RECENT else record.schedule.description
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        s, col = record.schedule, index.column()
        if col == COL_NAME:
            return s.name
        if col == COL_WHEN:
            return s.expression
        if col == COL_ZONE:
            return s.timezone
        if col == COL_TYPE:
            return s.type
        if col == COL_NEXT:
            return "—" if record.paused else _when(record.next_tick_at, self.now)
        if col == COL_LAST:
            return _when(record.last_tick_at, self.now)
        if col == COL_DESCRIPTION:
            return s.description or "—"
        if col == COL_RECENT:
            return recent_text(record)
        return "‖ paused" if record.paused else "▶ active"


class TickTableModel(RowsTableModel):
    headers = TICK_COLUMNS

    def __init__(self) -> None:
        super().__init__()
        self._rows: list[ScheduledJob] = []

    def set_ticks(self, ticks: list[ScheduledJob]) -> None:
        self.beginResetModel()
        self._rows = list(ticks)
        self.endResetModel()

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        tick = self.row_at(index.row()) if index.isValid() else None
        if tick is None:
            return None
        if role == Qt.ItemDataRole.UserRole:
            return tick.job_id
        if role == STATUS_ROLE and index.column() == TICK_COL_STATUS:
            return tick.status  # the job's status, or None once the job is pruned
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        col = index.column()
        if col == 0:
            return f"{tick.tick_at.astimezone():%Y-%m-%d %H:%M:%S}"
        if col == 1:
            return short_id(tick.job_id) if tick.job_id else "skipped: previous job unfinished"
        return tick.status or ("—" if tick.job_id is None else "pruned")

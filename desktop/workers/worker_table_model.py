"""Rows of the `workers` table for the Workers panel.

Heartbeat ages tick locally between fetches, so a worker that stops heartbeating turns lost on
screen as soon as its lease runs out. A new fetch updates rows in place, so the selection stays.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtGui import QColor, QFont

from jobdesk.console.table_model import Index, RowsTableModel
from jobdesk.console.theme import is_dark
from jobdesk.core.models import short_id
from jobdesk.core.timefmt import relative
from jobdesk.store import fleet
from jobdesk.store.fleet import WorkerRecord

WORKER_ROLE = Qt.ItemDataRole.UserRole + 1  # the WorkerRecord of a row
JOBS_ROLE = Qt.ItemDataRole.UserRole + 2  # ids of the jobs it runs

COLUMNS = ["State", "Host", "PID", "Slots", "Jobs in flight", "Job types", "Version", "Last heartbeat", "Worker id"]
COL_STATE, COL_HOST, COL_PID, COL_SLOTS, COL_JOBS, COL_TYPES, COL_VERSION, COL_HEARTBEAT, COL_ID = range(len(COLUMNS))

# A symbol beside each state, so that no state depends on colour alone.
STATE_SYMBOLS = {"running": "▶", "paused": "‖", "draining": "⇣", "stopped": "■", "lost": "⚠"}
LOST_COLOURS = ("#cf222e", "#ff7b72")  # light, dark
STOPPED_COLOURS = ("#8c959f", "#6e7681")  # stopped workers recede



def _ago(seconds: float) -> str:
    now = datetime.now(UTC)
    return relative(now - timedelta(seconds=max(0.0, seconds)), now)


class WorkerTableModel(RowsTableModel):
    """Every worker seen in the `workers` table, in the order the server lists them."""

    headers = COLUMNS

    def __init__(self, lease_timeout_s: float, launched_pids: Callable[[], set[int]] = set) -> None:
        super().__init__()
        self.lease_timeout_s = lease_timeout_s
        self.launched_pids = launched_pids  # pids this console started, marked "this console"
        self.host = socket.gethostname()
        self._rows: list[WorkerRecord] = []
        self._fetched_at = time.monotonic()

    # -- what the panel asks ----------------------------------------------------------------

    def workers(self) -> list[WorkerRecord]:
        return list(self._rows)

    def row_of(self, worker_id: str) -> int | None:
        return next((i for i, w in enumerate(self._rows) if w.id == worker_id), None)

    def heartbeat_age(self, worker: WorkerRecord) -> float:
        return worker.heartbeat_age_s + (time.monotonic() - self._fetched_at)

    def is_lost(self, worker: WorkerRecord) -> bool:
        return fleet.is_lost(worker.state, self.heartbeat_age(worker), self.lease_timeout_s)

    def state_text(self, worker: WorkerRecord) -> str:
        if self.is_lost(worker):
            # Past its lease but not yet declared lost by another worker: "lost?", as in `jobdesk workers`.
            return f"{STATE_SYMBOLS['lost']} lost" + ("" if worker.state == "lost" else "?")
        return f"{STATE_SYMBOLS.get(worker.state, '')} {worker.state}"

    def is_local(self, worker: WorkerRecord) -> bool:
        return worker.host == self.host and worker.pid in self.launched_pids()

    # -- updates ----------------------------------------------------------------------------

    def set_workers(self, workers: list[WorkerRecord]) -> None:
        """Show a new fetch: rows that went are removed, new ones appended, then rows reordered
        and updated in place, so that selections follow their worker."""
        self._fetched_at = time.monotonic()
        new_ids = {w.id for w in workers}
        for row in reversed(range(len(self._rows))):
            if self._rows[row].id not in new_ids:
                self.beginRemoveRows(QModelIndex(), row, row)
                del self._rows[row]
                self.endRemoveRows()
        known = {w.id for w in self._rows}
        added = [w for w in workers if w.id not in known]
        if added:
            self.beginInsertRows(QModelIndex(), len(self._rows), len(self._rows) + len(added) - 1)
            self._rows.extend(added)
            self.endInsertRows()
        if [w.id for w in self._rows] != [w.id for w in workers]:
            self._reorder(workers)
        else:
            self._rows = list(workers)
        if self._rows:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self._rows) - 1, len(COLUMNS) - 1))

    def _reorder(self, workers: list[WorkerRecord]) -> None:
        self.layoutAboutToBeChanged.emit()
        old_ids = [w.id for w in self._rows]
        position = {w.id: i for i, w in enumerate(workers)}
        persistent = self.persistentIndexList()
        moved = [self.index(position[old_ids[i.row()]], i.column()) for i in persistent]
        self._rows = list(workers)
        self.changePersistentIndexList(persistent, moved)
        self.layoutChanged.emit()

    def tick(self) -> None:
        """A second passed: heartbeat ages, and the lost look that depends on them."""
        if self._rows:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self._rows) - 1, len(COLUMNS) - 1),
                                  [Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ForegroundRole,
                                   Qt.ItemDataRole.FontRole, Qt.ItemDataRole.ToolTipRole])

    # -- Qt model ---------------------------------------------------------------------------

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        worker = self.row_at(index.row()) if index.isValid() else None
        if worker is None:
            return None
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(worker, col)
        if role == WORKER_ROLE:
            return worker
        if role == JOBS_ROLE:
            return list(worker.running_jobs)
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(worker, col)
        if role == Qt.ItemDataRole.ForegroundRole:
            if self.is_lost(worker):
                return QColor(LOST_COLOURS[1 if is_dark() else 0])
            if worker.state == "stopped":
                return QColor(STOPPED_COLOURS[1 if is_dark() else 0])
            return None
        if role == Qt.ItemDataRole.FontRole and self.is_lost(worker):
            font = QFont()
            font.setBold(True)
            return font
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (COL_PID, COL_SLOTS):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def _text(self, worker: WorkerRecord, col: int) -> str:
        if col == COL_STATE:
            return self.state_text(worker)
        if col == COL_HOST:
            return worker.host + (" (this console)" if self.is_local(worker) else "")
        if col == COL_PID:
            return str(worker.pid)
        if col == COL_SLOTS:
            return str(worker.concurrency)
        if col == COL_JOBS:
            jobs = worker.running_jobs
            return f"{len(jobs)}: {', '.join(short_id(j) for j in jobs)}" if jobs else "0"
        if col == COL_TYPES:
            return ", ".join(worker.job_types)
        if col == COL_VERSION:
            return worker.version
        if col == COL_HEARTBEAT:
            return _ago(self.heartbeat_age(worker))
        if col == COL_ID:
            return worker.id
        return ""

    def _tooltip(self, worker: WorkerRecord, col: int) -> str | None:
        if col in (COL_STATE, COL_HEARTBEAT) and self.is_lost(worker):
            age = self.heartbeat_age(worker)
            if worker.state == "lost":
                return f"Declared lost by another worker; no heartbeat for {age:.0f} s. Its jobs were taken back."
            return (f"No heartbeat for {age:.0f} s (JOB_LEASE_TIMEOUT is {self.lease_timeout_s:g} s): "
                    f"presumed lost. The next worker to check will take its jobs back.")
        if col == COL_STATE and worker.requested:
            return f"asked to {worker.requested}; waiting for the worker to act"
        if col == COL_TYPES:
            return "\n".join(worker.job_types) or None
        if col == COL_HEARTBEAT:
            return f"started {worker.started_at.astimezone():%Y-%m-%d %H:%M:%S}"
        return None

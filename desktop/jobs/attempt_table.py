"""The History tab's table of a job's finished runs, and the words for its runs, retries and worker.

A run is one claim of the job by a worker. A retry is a run after a failure; a durable processor's
run that ended in a sleep or a wait (outcome `suspended`) is followed by a run that resumes it,
which is neither a failure nor a retry. `jobs.attempts` counts every run, `jobs.retry_count` the
retries; the table and the detail pane say them apart."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from jobdesk.core.models import JobRecord
from jobdesk.service.jobs import Attempt

SUSPENDED = "suspended"  # the outcome of a run that ended in a sleep or a wait
HEADERS = ["Run", "Outcome", "Finished", "Duration", "Error"]
COL_ERROR = 4


def attempts_table() -> QTableWidget:
    """Columns as wide as their text (in the current font), the error taking the rest, elided,
    with the whole of it in the tooltip: never a sideways scroll bar, never a wrapped time."""
    table = QTableWidget(0, len(HEADERS))
    table.setHorizontalHeaderLabels(HEADERS)
    table.verticalHeader().hide()
    table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setWordWrap(False)
    table.setTextElideMode(Qt.TextElideMode.ElideRight)
    table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    header = table.horizontalHeader()
    header.setMinimumSectionSize(24)
    for col in range(len(HEADERS)):
        mode = QHeaderView.ResizeMode.Stretch if col == COL_ERROR else QHeaderView.ResizeMode.ResizeToContents
        header.setSectionResizeMode(col, mode)
    return table


def show_attempts(table: QTableWidget, attempts: Sequence[Attempt]) -> None:
    table.setRowCount(len(attempts))
    for i, attempt in enumerate(attempts):
        took = ""
        if attempt.started_at and attempt.finished_at:
            took = f"{(attempt.finished_at - attempt.started_at).total_seconds():.2f}s"
        error = attempt.error_message or ""
        cells = [str(attempt.attempt), attempt.outcome, attempt.finished_at.astimezone().strftime("%Y-%m-%d %H:%M:%S"),
                 took, error.splitlines()[0] if error else ""]
        for col, text in enumerate(cells):
            item = QTableWidgetItem(text)
            if col == COL_ERROR and error:
                item.setToolTip(error)
            elif col < COL_ERROR:
                item.setTextAlignment(Qt.AlignmentFlag.AlignVCenter
                                      | (Qt.AlignmentFlag.AlignRight if col in (0, 3) else Qt.AlignmentFlag.AlignLeft))
            table.setItem(i, col, item)


def runs_text(runs: int, attempts: Sequence[Attempt]) -> str:
    """"3: 1 try, resumed 2× after a suspension" for a durable job that suspended twice; "3" for
    one that failed twice (its retries are said apart, by `retries_text`)."""
    if runs == 0:
        return "not run yet"
    resumed = min(sum(1 for a in attempts if a.outcome == SUSPENDED), runs)
    if not resumed:
        return str(runs)
    tries = runs - resumed
    tried = f"{tries} {'try' if tries == 1 else 'tries'}, " if tries else ""
    return f"{runs}: {tried}resumed {resumed}× after a suspension"


def retries_text(retries: int) -> str:
    """"0 used", "2 used": the retries after failures (a suspension is not one)."""
    return f"{retries} used"


def worker_of(record: JobRecord, attempts: Sequence[Attempt]) -> str:
    """The worker running the job, or else the one that ran its last run: a finished job's row no
    longer names it, its `job_attempts` rows do. A completed job's last run is not among those
    rows (only runs that did not complete are); it says so."""
    if record.worker_id:
        return record.worker_id
    last = next((a.worker_id for a in reversed(attempts) if a.worker_id), None)
    if last is None:
        return "—"
    if record.completed_at is not None:
        return f"{last} (an earlier run)"
    return last

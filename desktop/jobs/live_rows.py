"""What the job table reads when jobs change: bounded by what the screen shows, not by how many
jobs change.

A busy queue changes thousands of jobs a second, and every change is announced. Reading each
changed job back would cost every open console (and the database) in proportion to that rate.
Instead, `LiveRows` reads at most one thing at a time, and changes announced meanwhile are read
together once it ends:

- at the top of the table, where new jobs arrive, a change the table does not hold reads the
  first rows again, as many as are on screen and a margin, and down to the selected row
  (`JobTableModel.refresh_head`);
- scrolled down (where a selected row also keeps the view once jobs arrive above it), only the
  changed jobs among the rows on screen (and a margin) are read back; jobs that may have arrived
  above are read when the view is back at the top;
- while the tab is hidden or the window minimised, nothing is read (`ShownGate`): the tab is
  read again when it is on screen.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QTableView

from jobdesk.console.errors import EXPECTED
from jobdesk.console.jobs.job_table_model import JobTableModel
from jobdesk.console.shown_gate import ShownGate
from jobdesk.console.tasks import spawn

log = logging.getLogger("jobdesk.console")

MARGIN_ROWS = 25  # rows read beyond those on screen, so a short scroll finds them fresh


class LiveRows(QObject):
    """Turns announced changes into bounded reads of the job table's model."""

    def __init__(self, table: QTableView, model: JobTableModel, gate: ShownGate, *,
                 after: Callable[[], None] = lambda: None, selected: Callable[[], int] = lambda: -1) -> None:
        super().__init__(table)
        self.table = table
        self.model = model
        self.gate = gate
        self._after = after  # called after each read (the selection may have changed)
        self._selected = selected  # the last selected row's position, -1 without a selection
        self._pending: set[str] = set()
        self._everything = False
        self._task: asyncio.Task[None] | None = None
        self.head_stale = False  # jobs may have arrived above while the view was scrolled down
        table.verticalScrollBar().valueChanged.connect(self._scrolled)

    def changed(self, ids: set[str] | None) -> None:
        """These jobs changed (None: any may have). Read what is on screen, now or after the read
        under way; nothing while the tab is off screen (the gate reads it again when shown)."""
        if not self.gate.shown():
            return
        if ids is None:
            self._everything = True
        else:
            self._pending |= ids
        if self._task is None:
            self._task = spawn(self._run(), "job-table-live")

    async def _run(self) -> None:
        try:
            while self._everything or self._pending:
                ids = None if self._everything else self._pending
                self._everything, self._pending = False, set()
                try:
                    await self.read(ids)
                except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
                    log.warning("live update failed: %s", exc)
                self._after()
        finally:
            self._task = None

    def rows_on_screen(self) -> tuple[int, int]:
        """The first and last rows the view shows (last < first when it shows none)."""
        count = self.model.rowCount()
        first = self.table.rowAt(0)
        if first < 0:
            return 0, min(count, self.visible_capacity()) - 1
        last = self.table.rowAt(self.table.viewport().height() - 1)
        return first, count - 1 if last < 0 else last

    def visible_capacity(self) -> int:
        """How many rows the viewport has room for."""
        height = max(1, self.table.verticalHeader().defaultSectionSize())
        return self.table.viewport().height() // height + 1

    def at_top(self) -> bool:
        return self.table.verticalScrollBar().value() == 0

    async def read(self, ids: set[str] | None) -> None:
        """One bounded read for these changes (None: any job may have changed)."""
        model = self.model
        first, last = self.rows_on_screen()
        unknown = 0 if ids is None else sum(model.row_of(i) is None for i in ids)
        if self.at_top() and (ids is None or unknown):
            self.head_stale = False
            limit = max(last + 1, self.visible_capacity()) + MARGIN_ROWS
            held = self._selected()
            if held >= 0:  # the selected row stays in the table, below the jobs that arrive above it
                limit = max(limit, held + 1 + unknown + MARGIN_ROWS)
            await model.refresh_head(limit)
            return
        low, high = max(0, first - MARGIN_ROWS), last + MARGIN_ROWS
        if ids is None:
            wanted = {model.row_key(r) for r in (model.row_at(i) for i in range(low, high + 1)) if r is not None}
            self.head_stale = True
        else:
            wanted = set()
            for job_id in ids:
                position = model.row_of(job_id)
                if position is None:
                    self.head_stale = True  # perhaps new, above the view: read once scrolled back up
                elif low <= position <= high:
                    wanted.add(job_id)
        if wanted:
            await model.apply_changes(wanted)

    def _scrolled(self, value: int) -> None:
        if value == 0:
            self.released()

    def released(self) -> None:
        """The view is back at the top: read what arrived above meanwhile."""
        if self.head_stale and self.at_top():
            self.changed(None)

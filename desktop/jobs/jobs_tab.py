"""The Jobs tab: the live job table with its status counts and filters.

It owns its model, its filters and its state; the main window lays it out and connects its
signals, as it does for the Pipelines tab."""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from PySide6.QtCore import QEvent, QItemSelectionModel, QObject, QRect, Qt, QTimer, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QLineEdit, QToolButton, QVBoxLayout, QWidget

from jobdesk.console.column_prefs import ColumnPrefs
from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.errors import EXPECTED
from jobdesk.console.jobs.job_progress import JobProgressDelegate
from jobdesk.console.jobs.job_table_model import (
    COL_CREATED,
    COL_DURATION,
    COL_ID,
    COL_PROGRESS,
    COL_RETRY,
    COL_STATUS,
    COL_UPDATED,
    COL_USER,
    JobTableModel,
)
from jobdesk.console.jobs.live_rows import LiveRows
from jobdesk.console.jobs.saved_views import SavedViews
from jobdesk.console.jobs.search_box import SearchBox
from jobdesk.console.jobs.search_syntax import parse_search
from jobdesk.console.jobs.status_delegate import StatusChipDelegate
from jobdesk.console.list_table import list_table, scaled
from jobdesk.console.scroll_anchor import ScrollAnchor
from jobdesk.console.shown_gate import ShownGate
from jobdesk.console.status_filter import checked, status_buttons
from jobdesk.console.tasks import spawn
from jobdesk.console.theme import STATUS_COLOURS, status_label
from jobdesk.core.models import Status
from jobdesk.store.jobs import JobFilter, JobRow, StatusCounts

log = logging.getLogger("jobdesk.console")

TIME_RANGES = {"Any time": None, "Last hour": timedelta(hours=1), "Last 24 hours": timedelta(days=1),
               "Last 7 days": timedelta(days=7)}
# ID, Type, Status, Pipeline, User, Runs, Created, Updated, Duration, Next retry, Error: the
# default columns fit the table's share of a 1280-pixel window without scrolling sideways.
COLUMN_WIDTHS = [76, 118, 134, 90, 76, 50, 44, 68, 68, 64, 80, 100]  # the last one stretches
# Hidden until asked for in the header's menu. Next retry gives its place to Progress: a retry's
# time is in the detail pane, and the table must fit 1280 pixels without scrolling sideways.
HIDDEN_COLUMNS = (COL_USER, COL_UPDATED, COL_RETRY)
CLOCK_COLUMNS = (COL_STATUS, COL_CREATED, COL_UPDATED, COL_DURATION, COL_RETRY)  # "3 s ago", "in 5 s", …
EMPTY_HINT = ("<p><b>No jobs yet.</b></p><p>Press <b>Ctrl+N</b> to submit one, or from a shell:</p>"
              "<p><code>jobdesk submit echo --input '{\"hello\": \"world\"}'</code></p>"
              "<p>or from any language:</p>"
              "<p><code>INSERT INTO jobs (type, input_data) VALUES ('echo', '{\"hello\": \"world\"}');</code></p>")
NO_MATCH_HINT = "<p><b>No jobs match this filter.</b></p>"
# While jobs change, the status counts are read again at most this often: each read counts up to
# COUNT_CAP jobs per status, whatever the rate of changes.
COUNTS_EVERY_MS = 5000


class JobsTab(QWidget):
    """Status buttons with capped counts, filter fields, and the paged live job table."""

    selection_changed = Signal(list)  # the selected JobRows
    message = Signal(str)  # something to tell the user in the status bar
    query_failed = Signal(str)
    counts_changed = Signal(object)  # the StatusCounts of the current filter

    def __init__(self, connection: ConsoleConnection) -> None:
        super().__init__()
        self.connection = connection
        self._debounce = QTimer(self, singleShot=True, interval=400)
        self._debounce.timeout.connect(self.apply_filters)
        self._build_table(connection)
        filters = self._build_status_filters()
        fields = self._build_fields()
        self.views = SavedViews(self, self)  # named filters of this connection: the Views button
        self.views.use_profile(connection.describe())
        self.views.message.connect(self.message)
        fields.addWidget(self.views.button)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addLayout(filters)
        layout.addLayout(fields)
        layout.addWidget(self.search_error)
        layout.addWidget(self.table, 1)

        self._counts_timer = QTimer(self, singleShot=True, interval=COUNTS_EVERY_MS)
        self._counts_timer.timeout.connect(self._counts_due)
        self._clock = QTimer(self, interval=1000)
        self._clock.timeout.connect(self._tick)
        self._clock.start()
        # Off screen (another tab, a minimised window) the table reads nothing and its clock
        # stops; it is read again when it is shown.
        self.gate = ShownGate(self, self._read_again, active=lambda: self.model.active, clocks=(self._clock,))
        self.live = LiveRows(self.table, self.model, self.gate, after=self._selection_may_have_changed,
                             selected=self._last_selected_row)
        self._update_status_labels(StatusCounts())

    def _build_table(self, connection: ConsoleConnection) -> None:
        """The paged live table, its saved columns, and the hint shown over it while it is empty."""
        self.model = JobTableModel(connection.run)
        self.model.failed.connect(self.query_failed)
        self.model.loaded.connect(self._select_pending)
        self._loaded_once = False  # the empty-table hint waits for the first answer
        self.model.loaded.connect(self._first_load)
        self.table = list_table(self.model, COLUMN_WIDTHS, multi_select=True)
        # "jobs-2": the header states saved before the Progress column came are not restored onto it.
        self.columns = ColumnPrefs(self.table, "jobs-2", COLUMN_WIDTHS, HIDDEN_COLUMNS)
        self.columns.use_profile(connection.describe())
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.scroll_anchor = ScrollAnchor(self.table)  # new jobs above leave the selected row in view
        self.empty_hint = QLabel(self.table.viewport())
        self.empty_hint.setObjectName("emptyHint")
        self.empty_hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_hint.setWordWrap(True)
        self.empty_hint.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.empty_hint.hide()
        self.table.viewport().installEventFilter(self)
        for signal in (self.model.modelReset, self.model.rowsInserted, self.model.rowsRemoved):
            signal.connect(self._update_empty_hint)
        self.table.setSortingEnabled(True)
        self.table.horizontalHeader().setSortIndicator(COL_ID, Qt.SortOrder.DescendingOrder)
        self.table.setItemDelegateForColumn(COL_STATUS, StatusChipDelegate(self.table))
        self.table.setItemDelegateForColumn(COL_PROGRESS, JobProgressDelegate(self.table))
        self.table.selectionModel().selectionChanged.connect(self._selection_changed)
        self._pending_select: str | None = None
        self._selected: list[JobRow] = []  # the selection last told

    def _build_status_filters(self) -> QHBoxLayout:
        """The row of status buttons, each with its capped count."""
        filters = QHBoxLayout()
        self.status_buttons = status_buttons({s: STATUS_COLOURS[s][0] for s in Status}, filters,
                                             self.apply_filters)
        filters.addStretch(1)
        return filters

    def _build_fields(self) -> QHBoxLayout:
        """Type, pipeline, user, time range, search, and the chip of a Failures group shown here."""
        fields = QHBoxLayout()  # a second row, so the window still fits a 1280-pixel screen
        self.type_edit = self._filter_edit("type", 110)
        self.pipeline_edit = self._filter_edit("pipeline id", 110)
        self.user_edit = self._filter_edit("user", 60)
        self.search_edit = SearchBox()
        self.search_edit.setMinimumWidth(scaled(220, self.search_edit))
        self.search_edit.returnPressed.connect(self.apply_filters)
        self.search_edit.textChanged.connect(lambda _t: self._debounce.start())
        self.search_error = QLabel()
        self.search_error.setObjectName("searchError")
        self.search_error.setWordWrap(True)
        self.search_error.hide()
        self.time_combo = QComboBox()
        self.time_combo.addItems(list(TIME_RANGES))
        self.time_combo.currentIndexChanged.connect(self.apply_filters)
        for widget in (self.type_edit, self.pipeline_edit, self.user_edit, self.time_combo):
            fields.addWidget(widget)
        fields.addWidget(self.search_edit, 1)
        # A Failures group shown in the table: its error fingerprint filters until cleared.
        self.fingerprint: str | None = None
        self.fingerprint_chip = QToolButton()
        self.fingerprint_chip.setObjectName("filterChip")
        self.fingerprint_chip.clicked.connect(lambda: self.show_fingerprint(None))
        self.fingerprint_chip.hide()
        fields.addWidget(self.fingerprint_chip)
        return fields

    def stop_timers(self) -> None:
        for timer in (self._debounce, self._counts_timer, self._clock):
            timer.stop()
        self.columns.flush()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        if watched is self.table.viewport() and event.type() == QEvent.Type.Resize:
            self.empty_hint.setGeometry(self.table.viewport().rect().adjusted(24, 24, -24, -24))
        return super().eventFilter(watched, event)

    def _first_load(self) -> None:
        self._loaded_once = True
        self._update_empty_hint()

    def _update_empty_hint(self, *_: object) -> None:
        """An empty table says how to get started (or that the filter hides everything)."""
        empty = self.model.active and self.model.rowCount() == 0 and self._loaded_once
        if empty:
            self.empty_hint.setText(NO_MATCH_HINT if self.model.filter != JobFilter() else EMPTY_HINT)
        self.empty_hint.setVisible(empty)

    # -- connection and live updates --------------------------------------------------------

    def set_active(self, active: bool) -> None:
        self.model.active = active
        if active:
            self.gate.stale = False  # read now, hidden or not: the first screen
            self.model.reload()
            self._counts_timer.start(0)

    def on_jobs_changed(self, ids: set[str] | None) -> None:
        self.live.changed(ids)
        if not self._counts_timer.isActive():
            self._counts_timer.start(COUNTS_EVERY_MS)

    def _read_again(self) -> None:
        """The tab is on screen again after changes it did not read."""
        self.live.changed(None)
        self._counts_timer.start(0)

    def _counts_due(self) -> None:
        if self.gate.shown():  # else they are read when the tab is shown again
            spawn(self.refresh_counts(), "status-counts")

    async def refresh_counts(self) -> None:
        filt = self.model.filter
        try:
            counts = await self.connection.run(lambda jobs: jobs.status_counts(filt))
        except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
            log.warning("status counts failed: %s", exc)
            return
        self._update_status_labels(counts)
        self.counts_changed.emit(counts)

    def every_job_count(self, counts: StatusCounts) -> int | None:
        """How many jobs the table holds, as `counts` (the chips') say: their total while the
        filter narrows nothing but the status, and no status reached the cap; else None."""
        total, exact = counts.total()
        narrowed = replace(self.model.filter, statuses=frozenset()) != JobFilter()
        return total if exact and not narrowed else None

    def _update_status_labels(self, counts: StatusCounts) -> None:
        for status, button in self.status_buttons.items():
            if status is None:
                continue
            n = counts.counts.get(status, 0)
            shown = f"{n:,}" + ("" if counts.exact(status) else "+")
            button.setText(f"{status_label(status)} {shown}")
            button.setToolTip("" if counts.exact(status) else f"at least {n:,} (counting stops there)")
        total, exact = counts.total()
        self.status_buttons[None].setText(f"All {total:,}{'' if exact else '+'}")

    def _tick(self) -> None:
        """Redraw the columns whose text follows the clock; a repaint of the whole table every
        second would hold the event loop for tens of milliseconds. Skipped when a live read
        has just redrawn the rows on screen with the time of the read."""
        if time.monotonic() - self.model.head_read_at < 0.9:
            return
        self.model.now = datetime.now(UTC)
        viewport = self.table.viewport()
        for col in CLOCK_COLUMNS:
            if not self.table.isColumnHidden(col):
                viewport.update(QRect(self.table.columnViewportPosition(col), 0, self.table.columnWidth(col),
                                      viewport.height()))

    # -- filters ----------------------------------------------------------------------------

    def _filter_edit(self, placeholder: str, width: int) -> QLineEdit:
        edit = QLineEdit()
        edit.setPlaceholderText(placeholder)
        edit.setClearButtonEnabled(True)
        edit.setMinimumWidth(scaled(width, edit))
        edit.returnPressed.connect(self.apply_filters)
        edit.textChanged.connect(lambda _t: self._debounce.start())
        return edit

    def current_filter(self) -> JobFilter:
        return self._parse()[0]

    def _parse(self) -> tuple[JobFilter, list[str]]:
        """The filter of the fields and the search box's terms, and what is wrong with them."""
        statuses = checked(self.status_buttons)
        user_text = self.user_edit.text().strip()
        span = TIME_RANGES[self.time_combo.currentText()]
        type_text = self.type_edit.text().strip()
        base = JobFilter(statuses=statuses, type=type_text if "*" not in type_text else None,
                         type_pattern=type_text if "*" in type_text else None,
                         pipeline_id=self.pipeline_edit.text().strip() or None,
                         user_id=int(user_text) if user_text.isdigit() else None,
                         created_from=datetime.now(UTC) - span if span else None,
                         fingerprint=self.fingerprint)
        parsed = parse_search(self.search_edit.text(), base)
        problems = list(parsed.errors)
        if user_text and not user_text.isdigit():
            problems.insert(0, "user must be a number")
        return parsed.filter, problems

    def apply_filters(self) -> None:
        filt, problems = self._parse()
        # Bad terms are named under the search box and left out; the rest still filters.
        self.search_error.setText("⚠ " + "; ".join(problems) if problems else "")
        self.search_error.setVisible(bool(problems))
        if problems and "user must be a number" in problems:
            self.message.emit("user must be a number")
        self.model.set_query(filt)
        self._counts_timer.start(0)

    def show_pipeline(self, pipeline_id: str) -> None:
        """Narrow the table to one pipeline's jobs."""
        self.pipeline_edit.setText(pipeline_id)
        self.apply_filters()

    def show_fingerprint(self, fingerprint: str | None) -> None:
        """Narrow the table to the jobs whose error has this fingerprint (None: clear that)."""
        self.fingerprint = fingerprint
        self.fingerprint_chip.setVisible(fingerprint is not None)
        if fingerprint is not None:
            shown = fingerprint if len(fingerprint) <= 40 else fingerprint[:39] + "…"
            self.fingerprint_chip.setText(f"error: {shown}  ✕")
            self.fingerprint_chip.setToolTip(f"Only jobs whose error is “{fingerprint}”; click to clear")
        self.apply_filters()

    def show_notice(self, job_id: str | None, statuses: frozenset[str], job_type: str | None) -> None:
        """A notification was opened: its job alone (searched for, then selected), or the jobs of
        its statuses and type."""
        if job_id is not None:
            statuses, job_type = frozenset(), None
        for status, button in self.status_buttons.items():
            button.setChecked(status is not None and str(status) in statuses)
        self.status_buttons[None].setChecked(not statuses)
        self.type_edit.setText(job_type or "")
        self.pipeline_edit.clear()
        self.search_edit.clear()
        if job_id is not None:
            self.select_when_shown(job_id, pipeline_id=None)
        else:
            self.apply_filters()

    # -- selection --------------------------------------------------------------------------

    def selected_rows(self) -> list[JobRow]:
        rows = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        return [r for r in (self.model.row_at(i) for i in rows) if r is not None]

    def select_job(self, job_id: str) -> bool:
        """Select the job's row if the table shows it; False if it does not."""
        row = self.model.row_of(job_id)
        if row is None:
            return False
        # The selection model, not selectRow: selectRow follows the keyboard's modifiers, so with
        # Ctrl or Shift down (a shortcut just used) it added the row to the selection or toggled it.
        index = self.model.index(row, 0)
        flags = QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows
        self.table.selectionModel().setCurrentIndex(index, flags)
        self.table.scrollTo(index)
        return True

    def select_when_shown(self, job_id: str, *, pipeline_id: str | None) -> None:
        """Select a job that is not shown yet: narrow to its pipeline (or search for it) first."""
        self._pending_select = job_id
        if pipeline_id:
            self.show_pipeline(pipeline_id)
        else:
            self.search_edit.setText(job_id)
            self.apply_filters()

    def _select_pending(self) -> None:
        job_id = self._pending_select
        if job_id is not None and self.model.row_of(job_id) is not None:
            self._pending_select = None
            self.select_job(job_id)

    def _selection_changed(self, *_: object) -> None:
        rows = self.selected_rows()
        self._selected = rows
        self.selection_changed.emit(rows)

    def _last_selected_row(self) -> int:
        return max((i.row() for i in self.table.selectionModel().selectedRows()), default=-1)

    def _selection_may_have_changed(self) -> None:
        """After a live read: tell only if the selected rows changed (a read that leaves them
        alone costs no repaint of the detail pane and the actions)."""
        if self.selected_rows() != self._selected:
            self._selection_changed()


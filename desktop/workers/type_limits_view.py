"""The Limits view's types: every known job type, paused or not, each limit in force and where it
came from (a JOB_* setting, or the database and who set it there), its utilisation (a gauge of
its running jobs against its limit) and its last 5 minutes (a sparkline of jobs finished and
attempts failed), with Pause type, Resume type and Edit limits… on the selected type. The same
service calls as `jobdesk types`; bad input is one message here, and nothing is written."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from jobdesk.console.access import gate
from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.errors import EXPECTED
from jobdesk.console.jobs.type_actions import TYPE_ACTIONS, ask_reason, done_text, run_type_action
from jobdesk.console.sparklines import GLANCE_ROLE, GaugeDelegate, SparklineDelegate, gauge_text, sparkline_text
from jobdesk.console.tasks import spawn
from jobdesk.core.errors import JobdeskError
from jobdesk.core.type_controls import LIMIT_NAMES, TypeControl, parse_limit_changes

HEADERS = ("Type", "State", "Limit", "Rate", "User limit", "User rate", "Running", "Last 5 min")
COL_GAUGE, COL_SPARKLINE = 6, 7
LABELS = {"limit": "Limit (running, fleet-wide)", "rate": "Rate (like 10/s)", "user_limit": "Limit per user",
          "user_rate": "Rate per user (like 2/s)"}
MAX_ROWS_SHOWN = 3  # the table grows with its rows up to this many, then scrolls: the workers keep the room

log = logging.getLogger("jobdesk.console")


def cell_text(record: TypeControl, name: str) -> str:
    """`2 · env JOB_TYPE_LIMITS`, `10/s · database (set by alice)`, or `—`."""
    held = record.limit(name)
    return "—" if held.value is None else f"{held.value} · {held.source}"


def controlled(record: TypeControl) -> bool:
    """Whether a type is paused or has a limit in force."""
    return record.paused or any(record.limit(n).value is not None for n in LIMIT_NAMES)


def state_text(record: TypeControl) -> str:
    if not record.paused:
        return "active"
    why = f": {record.reason}" if record.reason else ""
    return f"paused by {record.paused_by}{why}"


class LimitsDialog(QDialog):
    """The operator's limits of one type: a field left empty is not set in the database (the
    JOB_* setting, shown as the placeholder, is in force). Checked before it closes."""

    def __init__(self, record: TypeControl, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Limits of {record.type}")
        self.record = record
        form = QFormLayout()
        self.edits: dict[str, QLineEdit] = {}
        for name in LIMIT_NAMES:
            held = record.limit(name)
            edit = QLineEdit(str(held.value) if held.source and held.source.startswith("database") else "")
            edit.setObjectName(f"{name}Edit")
            edit.setPlaceholderText(f"{held.value} ({held.source})" if held.value is not None and held.source
                                    else "no limit")
            form.addRow(LABELS[name], edit)
            self.edits[name] = edit
        self.error = QLabel()
        self.error.setObjectName("limitsError")
        self.error.setWordWrap(True)
        self.error.hide()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addWidget(buttons)

    def changes(self) -> dict[str, object]:
        """Every limit, by name: the text given, or None (cleared) for an empty field."""
        return {name: edit.text().strip() or None for name, edit in self.edits.items()}

    def accept(self) -> None:
        try:
            parse_limit_changes(self.changes())
        except JobdeskError as exc:
            self.show_error(str(exc))
            return
        super().accept()

    def show_error(self, text: str) -> None:
        self.error.setText(f"⚠ {text}")
        self.error.show()


class TypeLimitsView(QWidget):
    """The known types and their controls; the Workers panel reads them when it reads the limits."""

    changed = Signal()  # a type was paused, resumed or limited here: read the types again
    message = Signal(str)

    def __init__(self, connection: ConsoleConnection, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.connection = connection
        self.records: list[TypeControl] = []  # those shown, row by row
        self.known: list[TypeControl] = []  # every known type
        self.busy = False
        self.table = QTableWidget(0, len(HEADERS))
        self.table.setObjectName("typesTable")
        self.table.setHorizontalHeaderLabels(HEADERS)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 8)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.itemSelectionChanged.connect(self.update_buttons)
        self.table.setItemDelegateForColumn(COL_GAUGE, GaugeDelegate(self.table))
        self.table.setItemDelegateForColumn(COL_SPARKLINE, SparklineDelegate(self.table))
        self.table.doubleClicked.connect(lambda _i: self.edit_clicked())
        self.buttons: dict[str, QPushButton] = {}
        self.tips: dict[str, str] = {}  # each button's own tooltip
        row = QHBoxLayout()
        for name, (label, tip) in (*TYPE_ACTIONS.items(), ("edit", ("Edit limits…", "Set this type's limits "
                                                                    "and rates at run time"))):
            button = QPushButton(label.replace("the selected job's type", "the selected type"))
            self.tips[name] = tip.replace("the selected job's type", "the selected type")
            button.clicked.connect(lambda _c=False, n=name: self.edit_clicked() if n == "edit" else self.clicked(n))
            self.buttons[name] = button
            row.addWidget(button)
        title = QLabel("Types")
        title.setObjectName("typesTitle")
        row.insertWidget(0, title)
        row.insertSpacing(1, 8)
        self.all_types = QCheckBox("All types")
        self.all_types.setObjectName("allTypes")
        self.all_types.setToolTip("Show every known type, not only those paused or limited")
        self.all_types.toggled.connect(lambda _on: self.show_types(self.known))
        row.addSpacing(8)
        row.addWidget(self.all_types)
        self.error_label = QLabel()
        self.error_label.setObjectName("typesError")
        self.error_label.setWordWrap(True)
        self.error_label.hide()
        row.addWidget(self.error_label, 1)
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.table)
        connection.writable_changed.connect(lambda _w: self.update_buttons())
        self.update_buttons()
        self.hide()

    def show_types(self, known: list[TypeControl]) -> None:
        """Show the types paused or limited (every known type with All types), those first."""
        chosen = self.selected_type()
        self.known = known
        records = sorted((r for r in known if self.all_types.isChecked() or controlled(r)),
                         key=lambda r: (not controlled(r), r.type))
        self.records = records
        self.table.setRowCount(len(records))
        for r, record in enumerate(records):
            cells = (record.type, state_text(record), *(cell_text(record, n) for n in LIMIT_NAMES))
            for c, text in enumerate(cells):
                self.table.setItem(r, c, QTableWidgetItem(text))
            self._show_glance(r, record)
        if chosen is not None:
            self.select_type(chosen)
        shown = min(len(records), MAX_ROWS_SHOWN)
        self.table.setFixedHeight(self.table.horizontalHeader().height() + 2 * self.table.frameWidth()
                                  + sum(self.table.rowHeight(r) for r in range(shown)))
        self.table.setVisible(bool(records))
        self.setVisible(bool(known))
        self.update_buttons()

    def _show_glance(self, row: int, record: TypeControl) -> None:
        """The gauge (running against the limit in force) and the sparkline of the last 5 minutes."""
        a = record.activity
        limit = record.limit("limit").value
        limit = limit if isinstance(limit, int) else None
        queued = f"{a.queued:,}{'+' if a.queued_capped else ''} ready to run"
        gauge = QTableWidgetItem(gauge_text(a.running, limit))
        gauge.setData(GLANCE_ROLE, (a.running, limit))
        gauge.setToolTip(f"{gauge_text(a.running, limit)}{' (no limit)' if limit is None else ''}; {queued}")
        spark = QTableWidgetItem(sparkline_text(a.throughput, a.failed))
        spark.setData(GLANCE_ROLE, (a.throughput, a.failed))
        spark.setToolTip(f"Jobs finished (green) and attempts failed (red) in each 5 s of the last 5 minutes: "
                         f"{sparkline_text(a.throughput, a.failed)}")
        self.table.setItem(row, COL_GAUGE, gauge)
        self.table.setItem(row, COL_SPARKLINE, spark)

    def rows(self) -> list[tuple[str, ...]]:
        """The table as text, row by row."""
        def text(r: int, c: int) -> str:
            item = self.table.item(r, c)
            return item.text() if item is not None else ""
        return [tuple(text(r, c) for c in range(self.table.columnCount())) for r in range(self.table.rowCount())]

    def selected_type(self) -> str | None:
        rows = self.table.selectionModel().selectedRows()
        return self.records[rows[0].row()].type if rows and rows[0].row() < len(self.records) else None

    def select_type(self, job_type: str) -> bool:
        for r, record in enumerate(self.records):
            if record.type == job_type:
                self.table.selectRow(r)
                return True
        return False

    def update_buttons(self) -> None:
        can = self.selected_type() is not None and self.connection.is_connected and not self.busy
        why = self.connection.read_only_reason if self.connection.is_connected else None
        for name, button in self.buttons.items():
            gate(button, can, why, self.tips[name])

    def clicked(self, name: str) -> None:
        job_type = self.selected_type()
        if job_type is None:
            return
        reason = ask_reason(self, job_type) if name == "pause_type" else ""
        if reason is not None:
            spawn(self.perform(name, job_type, reason or None), f"types-{name}")

    def edit_clicked(self) -> None:
        job_type = self.selected_type()
        record = next((r for r in self.records if r.type == job_type), None)
        if record is None or not self.buttons["edit"].isEnabled():
            return
        dialog = LimitsDialog(record, self)
        if dialog.exec() == QDialog.DialogCode.Accepted:
            spawn(self.set_limits(record.type, dialog.changes()), "types-limits")

    async def perform(self, name: str, job_type: str, reason: str | None = None) -> bool:
        """Pause or resume a type (no dialogs)."""
        return await self._act(lambda: run_type_action(self.connection.act, name, job_type, reason), done_text)

    async def set_limits(self, job_type: str, changes: dict[str, object]) -> bool:
        """Set a type's limits (no dialogs): None clears one (the JOB_* setting is in force)."""
        return await self._act(lambda: self.connection.act(lambda jobs: jobs.set_type_limits(job_type, changes)),
                               lambda r: f"Limits of {r.type} set")

    async def _act(self, call: Callable[[], Awaitable[TypeControl]], said: Callable[[TypeControl], str]) -> bool:
        """Run a change; say how it went (the error here, in one line); read the types again."""
        self.busy = True
        self.update_buttons()
        try:
            record: TypeControl = await call()
        except JobdeskError as exc:
            self.show_error(str(exc))
            return False
        except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
            self.show_error(f"the change was not made: {exc}")
            return False
        finally:
            self.busy = False
            self.update_buttons()
        self.error_label.hide()
        self.message.emit(said(record))
        self.changed.emit()
        return True

    def show_error(self, text: str) -> None:
        self.error_label.setText(f"⚠ {text}")
        self.error_label.show()
        self.message.emit(text)

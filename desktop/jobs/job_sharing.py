"""Sharing what the console shows: Copy ID, Copy input, Copy result and Copy error to the
clipboard; the right-click menu of the job table (and of the approval inbox and the detail pane)
with every action on a job; Edit input and retry…;
Export… of the current filter; opening the console on one job (`jobdesk open JOB_ID`).

The copies and the menu act on the job the current tab has selected (rows, a DAG node, the
inbox), or else on the job the detail pane shows."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel
from PySide6.QtCore import QObject, QPoint, Qt, Signal
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMenu, QTableView

from jobdesk.console.errors import EXPECTED, reason
from jobdesk.console.jobs.edit_input_dialog import EditInputDialog
from jobdesk.console.jobs.input_models import input_models
from jobdesk.console.jobs.job_actions import ACTIONS, TYPE_ACTIONS
from jobdesk.console.tasks import spawn
from jobdesk.core.models import JobRecord, short_id
from jobdesk.store.jobs import JobFilter

if TYPE_CHECKING:
    from jobdesk.console.main_window import MainWindow

# what: (label, shortcut)
COPIES: dict[str, tuple[str, str]] = {
    "id": ("Copy ID", "Ctrl+Shift+C"),
    "input": ("Copy input", "Ctrl+Shift+I"),
    "result": ("Copy result", "Ctrl+Shift+U"),
    "error": ("Copy error", "Ctrl+Shift+E"),
}
EXPORT_FILTERS = "CSV (*.csv);;JSON lines (*.jsonl)"
EXPORT_FAILURES: tuple[type[BaseException], ...] = (*EXPECTED, OSError)  # a message each, not a bug report


def copied_text(record: JobRecord, what: str) -> str | None:
    """What Copy input, Copy result or Copy error puts on the clipboard (input and result as
    indented JSON); None when the job has none."""
    if what == "input":
        return json.dumps(record.input_data, indent=2, ensure_ascii=False)
    if what == "result":
        return None if record.result_data is None else json.dumps(record.result_data, indent=2, ensure_ascii=False)
    return record.error_message or None


def export_format(path: str, chosen_filter: str = "") -> str:
    """csv or jsonl, from the file's extension, else from the file dialog's chosen filter."""
    suffix = Path(path).suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    return "jsonl" if "jsonl" in chosen_filter else "csv"


class JobSharing(QObject):
    """Owns the copy and export actions, the job table's context menu and the Edit input dialog."""

    message = Signal(str)  # a result for the status bar

    def __init__(self, window: MainWindow) -> None:
        super().__init__(window)
        self.window = window
        self.connection = window.connection
        self._models: dict[str, type[BaseModel]] | None = None  # loaded with the first Edit input dialog
        self.edit_dialog: EditInputDialog | None = None
        self.copy_actions: dict[str, QAction] = {}
        for what, (label, shortcut) in COPIES.items():
            action = QAction(label, window)
            action.setShortcut(QKeySequence(shortcut))
            action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
            action.setToolTip(f"{label} of the selected job to the clipboard ({shortcut})")
            action.triggered.connect(lambda _c=False, w=what: self.copy(w))
            window.addAction(action)
            self.copy_actions[what] = action
        self.export_action = QAction("Export…", window)
        self.export_action.setToolTip("Write the jobs matching the job table's filter to a CSV or JSON lines file")
        self.export_action.triggered.connect(self.ask_export)
        window.addAction(self.export_action)
        for table in (window.jobs.table, window.approvals.table):  # the tables whose rows are jobs
            table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
            table.customContextMenuRequested.connect(lambda pos, t=table: self._table_menu(t, pos))
        window.detail.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        window.detail.customContextMenuRequested.connect(
            lambda pos: self.popup(self.job_menu(self.targets()), window.detail.mapToGlobal(pos)))
        window.pipelines.extend_node_menu = self.add_copies
        window.job_actions.edit_requested.connect(lambda job_id: spawn(self.edit_input(job_id), "edit-input"))
        self.message.connect(lambda text: window.statusBar().showMessage(text, 8000))

    # -- what the actions apply to -----------------------------------------------------------

    def targets(self) -> list[str]:
        """The ids the current tab has selected, or the job the detail pane shows."""
        ids = [row.id for row in self.window.job_actions.selection]
        if not ids and self.window.detail.job_id:
            ids = [self.window.detail.job_id]
        return ids

    # -- menus ------------------------------------------------------------------------------

    def _table_menu(self, table: QTableView, pos: QPoint) -> None:
        index = table.indexAt(pos)
        if index.isValid() and not table.selectionModel().isRowSelected(index.row(), index.parent()):
            table.selectRow(index.row())  # a right-click acts on the row under the pointer
        self.popup(self.job_menu(self.targets()), table.viewport().mapToGlobal(pos))

    @staticmethod
    def popup(menu: QMenu, where: QPoint) -> None:
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)  # one menu a right-click, gone once closed
        menu.popup(where)

    def job_menu(self, ids: list[str]) -> QMenu:
        """Every action on the selected jobs (each enabled where legal), Pause type and Resume type,
        the copies, Export… and Save view…"""
        menu = QMenu(self.window)
        menu.setToolTipsVisible(True)  # a disabled action says why (read-only, say)
        for name in ACTIONS:
            menu.addAction(self.window.job_actions.actions[name])
        menu.addSeparator()
        for name in TYPE_ACTIONS:  # on the selected jobs' type
            menu.addAction(self.window.job_actions.actions[name])
        menu.addSeparator()
        self.add_copies(menu, ids)
        menu.addSeparator()
        menu.addAction(self.export_action)
        menu.addAction(self.window.jobs.views.save_action)
        return menu

    def add_copies(self, menu: QMenu, ids: list[str] | str) -> None:
        """Copy ID, input, result and error of `ids` (one job for all but Copy ID) on `menu`."""
        ids = [ids] if isinstance(ids, str) else ids
        for what, (label, shortcut) in COPIES.items():
            action = menu.addAction(label)
            action.setShortcut(QKeySequence(shortcut))  # shown in the menu; the window's own action has the key
            action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)  # only while the menu is open
            action.setEnabled(len(ids) == 1 or (what == "id" and bool(ids)))
            action.triggered.connect(lambda _c=False, w=what, i=list(ids): self.copy(w, i))

    # -- copies -----------------------------------------------------------------------------

    def copy(self, what: str, ids: list[str] | None = None) -> None:
        ids = self.targets() if ids is None else ids
        if not ids:
            self.message.emit("select a job first")
            return
        if what == "id":
            self.to_clipboard("\n".join(ids), f"copied {len(ids)} job id(s)" if len(ids) > 1
                              else f"copied the id of job {short_id(ids[0])}")
            return
        spawn(self.copy_from_job(what, ids[0]), f"copy-{what}")

    async def copy_from_job(self, what: str, job_id: str) -> bool:
        """Copy the job's input, result or error; False (and a message) when it has none."""
        try:
            record = await self.connection.run(lambda jobs: jobs.get_job(job_id))
        except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
            self.message.emit(f"cannot copy the {what} of job {short_id(job_id)}: {reason(exc)}")
            return False
        text = copied_text(record, what)
        if text is None:
            self.message.emit(f"job {short_id(job_id)} has no {what}")
            return False
        self.to_clipboard(text, f"copied the {what} of job {short_id(job_id)}")
        return True

    def to_clipboard(self, text: str, note: str) -> None:
        QGuiApplication.clipboard().setText(text)
        self.message.emit(note)

    # -- Edit input and retry… --------------------------------------------------------------

    async def edit_input(self, job_id: str) -> EditInputDialog | None:
        """Open the JSON editor on the job's input, checked against its type's input model."""
        try:
            record = await self.connection.run(lambda jobs: jobs.get_job(job_id))
        except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
            self.window.job_actions.error.emit(f"cannot load job {short_id(job_id)}: {reason(exc)}")
            return None
        if self._models is None:
            try:
                self._models = input_models(self.connection.settings)
            except EXPECTED as exc:  # a processor module that cannot load: check the JSON only
                self.message.emit(f"input checks unavailable: {reason(exc)}")
                self._models = {}
        dialog = EditInputDialog(self.connection, record, self._models.get(record.type), self.window)
        dialog.retried.connect(self._retried)
        self.edit_dialog = dialog
        dialog.open()
        return dialog

    def _retried(self, job_id: str) -> None:
        self.message.emit(f"job {short_id(job_id)} queued again with the new input")
        self.window.job_actions.done.emit([job_id])

    # -- Export… ----------------------------------------------------------------------------

    def ask_export(self) -> None:
        path, chosen = QFileDialog.getSaveFileName(self.window, "Export the jobs matching the filter",
                                                   "jobs.csv", EXPORT_FILTERS)
        if path:
            spawn(self.export_to(path, export_format(path, chosen), self.window.jobs.current_filter()), "export")

    async def export_to(self, path: str, fmt: str, filt: JobFilter) -> int | None:
        """Write the jobs matching `filt` to `path`, a page at a time. The file appears whole or
        not at all: it is written beside, then renamed. The number of jobs written, or None."""
        part = f"{path}.part"
        self.message.emit(f"exporting jobs matching {filt.describe()}…")
        try:
            with open(part, "w", newline="", encoding="utf-8") as out:
                count = await self.connection.run(lambda jobs: jobs.export_jobs(
                    filt, fmt, out, progress=lambda n: self.message.emit(f"exported {n:,} job(s)…")))
            os.replace(part, path)
        except EXPORT_FAILURES as exc:  # expected failures are messages; bugs reach the error hook
            Path(part).unlink(missing_ok=True)
            self.window.job_actions.error.emit(f"export failed: {reason(exc)}")
            return None
        self.message.emit(f"exported {count:,} job(s) to {path}")
        return count

    # -- jobdesk open JOB_ID ----------------------------------------------------------------

    def open_job(self, job_id: str) -> None:
        """Show the job: in the job table (searched for until it is shown) and in the detail pane."""
        window = self.window
        window.tabs.setCurrentWidget(window.jobs)
        window.jobs.select_when_shown(job_id, pipeline_id=None)
        window.select_job(job_id)


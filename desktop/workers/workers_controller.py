"""What the Workers feature adds to a console window: the Workers dock, the worker log dock, the
"Launch worker" action, a worker started by itself on the embedded default, and the question on
quit about the workers this window launched."""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMainWindow, QMessageBox

from jobdesk.console.access import gate
from jobdesk.console.column_prefs import console_settings
from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.tasks import spawn
from jobdesk.console.theme import icon
from jobdesk.console.workers.launched_worker import LaunchedWorker, WorkerLauncher
from jobdesk.console.workers.log_dock import WorkerLogDock
from jobdesk.console.workers.workers_panel import WorkersPanel
from jobdesk.store import fleet
from jobdesk.store.fleet import WorkerRecord

log = logging.getLogger("jobdesk.console")

DOCK_SETTING = "layout/workers_dock"  # whether the Workers dock was open when last toggled


class WorkersController(QObject):
    """Builds the workers UI into `window` and owns the workers it launches."""

    job_link_clicked = Signal(str)  # a job id clicked in the Workers panel
    message = Signal(str)  # for the window's status bar

    def __init__(self, window: QMainWindow, connection: ConsoleConnection) -> None:
        super().__init__(window)
        self.window = window
        self.connection = connection
        # The answer to "stop the workers started from this console?" on close: None asks the user.
        self.stop_on_close: bool | None = None
        self.autostarted: LaunchedWorker | None = None
        self._autostart_checked = False
        self._stopping = False
        self._close_decided = False

        self.launcher = WorkerLauncher(connection, self)
        self.launcher.added.connect(lambda w: w.failed.connect(lambda why, w=w: self._worker_failed(w, why)))
        self.launch_action = QAction(icon("launch_worker"), "Launch worker", window)
        self.launch_action.setShortcut(QKeySequence("Ctrl+Shift+W"))
        self.launch_action.setToolTip("Start `jobdesk worker` on this database, as a child of the console "
                                      "(Ctrl+Shift+W)")
        self.launch_action.triggered.connect(self.launch)

        self.panel = WorkersPanel(connection, launch_action=self.launch_action, launched_pids=self.launcher.pids)
        self.panel.job_link_clicked.connect(self.job_link_clicked)
        self.panel.message.connect(self.message)
        self.panel.workers_loaded.connect(self._workers_loaded)
        self.launcher.changed.connect(self.panel.model.tick)  # "(this console)" follows launches and exits

        self.dock = QDockWidget("Workers", window)
        self.dock.setObjectName("workersDock")
        self.dock.setWidget(self.panel)
        self.dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                              | QDockWidget.DockWidgetFeature.DockWidgetFloatable
                              | QDockWidget.DockWidgetFeature.DockWidgetClosable)
        self.log_dock = WorkerLogDock(self.launcher, window)
        window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.dock)
        window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.log_dock)
        window.tabifyDockWidget(self.dock, self.log_dock)
        # Tall enough for 5 workers, from the font: the dock's title, the banner, the buttons and the
        # Limits view's Types line, then the table's header and 5 rows. The job table keeps the rest.
        line = self.panel.fontMetrics().height()
        row = self.panel.table.verticalHeader().defaultSectionSize()
        window.resizeDocks([self.dock], [4 * (line + 14) + 6 * row + 8], Qt.Orientation.Vertical)
        self.dock.raise_()
        self.log_dock.hide()  # until a worker is launched
        # Closed unless the user opened it last time: open, it takes a third of the job table's rows.
        self.dock_action = self.dock.toggleViewAction()
        self.dock_action.setText("Workers")
        self.dock_action.setIcon(icon("launch_worker"))
        self.dock_action.setShortcut(QKeySequence("Ctrl+Shift+K"))
        self.dock_action.setToolTip("Show or hide the Workers panel (Ctrl+Shift+K)")
        self.dock.setVisible(bool(console_settings().value(DOCK_SETTING, False, type=bool)))
        self.dock_action.triggered.connect(lambda on: console_settings().setValue(DOCK_SETTING, on))

        connection.connected.connect(lambda _d: self._update_action())
        connection.disconnected.connect(lambda _r: self._update_action())
        connection.writable_changed.connect(lambda _w: self._update_action())
        self._update_action()

    # -- launching --------------------------------------------------------------------------

    def launch(self) -> LaunchedWorker:
        """Start a worker on this database and show its log."""
        worker = self.launcher.launch()
        self.log_dock.show_worker(worker)
        self.log_dock.raise_()
        self.message.emit(f"started worker {worker.number} on {self.connection.describe()}")
        return worker

    def _worker_failed(self, worker: LaunchedWorker, why: str) -> None:
        self.message.emit(f"worker {worker.number} {why}; see its log")
        self.log_dock.show_worker(worker)
        self.log_dock.raise_()

    def _update_action(self) -> None:
        gate(self.launch_action, self.connection.is_connected, self.connection.read_only_reason,
             "Start `jobdesk worker` on this database, as a child of the console (Ctrl+Shift+W)")

    def _workers_loaded(self, workers: list[WorkerRecord]) -> None:
        """Once per connection: on the embedded default with no live worker, start one."""
        if self._autostart_checked:
            return
        self._autostart_checked = True
        settings = self.connection.settings
        if not (self.connection.embedded and settings.JOBDESK_AUTOSTART_WORKER and self.connection.writable):
            return
        live = [w for w in workers if w.state in fleet.LIVE_STATES and not self.panel.model.is_lost(w)]
        if live or self.launcher.running():
            return
        self.autostarted = self.launcher.launch()
        self.log_dock.show_worker(self.autostarted)
        self.dock.raise_()
        self.message.emit("no worker was running, so the console started one "
                          "(--no-worker or JOBDESK_AUTOSTART_WORKER=false turn this off)")

    # -- closing ----------------------------------------------------------------------------

    def may_close(self) -> bool:
        """Whether the window may close now. With launched workers still running, asks whether to
        stop them: Yes stops them gracefully and closes the window once they have exited, No leaves
        them running, Cancel keeps the window open."""
        running = self.launcher.running()
        if self._close_decided or not running:
            return True
        if self._stopping:
            return False
        answer = self.stop_on_close if self.stop_on_close is not None else self._ask(len(running))
        if answer is None:
            return False
        if not answer:
            self.launcher.leave_running()
            self._close_decided = True
            return True
        self._stopping = True
        self.message.emit(f"stopping {len(running)} worker(s)…")
        spawn(self._stop_then_close(), "stop-launched-workers")
        return False

    def _ask(self, n: int) -> bool | None:
        what = "the worker" if n == 1 else f"the {n} workers"
        box = QMessageBox(QMessageBox.Icon.Question, "jobdesk", f"Stop {what} started from this console?",
                          QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No
                          | QMessageBox.StandardButton.Cancel, self.window)
        detail = (f"Yes stops {'it' if n == 1 else 'them'} gracefully: running jobs get up to "
                  f"{self.connection.settings.JOB_SHUTDOWN_TIMEOUT:g} s to finish, then go back to the queue. "
                  f"No leaves {'it' if n == 1 else 'them'} running without the console.")
        if self.connection.embedded:
            detail += (" They use the embedded database, which keeps running while a worker left running "
                       "uses it.")
        box.setInformativeText(detail)
        box.setDefaultButton(QMessageBox.StandardButton.Yes)
        answer = box.exec()
        if answer == QMessageBox.StandardButton.Cancel:
            return None
        return answer == QMessageBox.StandardButton.Yes

    async def _stop_then_close(self) -> None:
        try:
            await self.launcher.stop_all()
        finally:
            self._stopping = False
            self._close_decided = True
        self.window.close()

    async def shutdown(self) -> None:
        """The console is exiting: stop, gracefully, the launched workers nobody chose to leave running."""
        self.stop()
        await self.launcher.stop_all()

    def stop(self) -> None:
        """Stop the panel's timers (the window is closing)."""
        self.panel.stop()

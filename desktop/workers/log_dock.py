"""The log of the workers this console launched, in a dock: pick a worker, stop or restart it,
search its log and filter it by level. New lines keep arriving while a filter is on."""

from __future__ import annotations

import logging

from PySide6.QtGui import QColor, QSyntaxHighlighter, QTextCharFormat
from PySide6.QtWidgets import (
    QComboBox,
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from jobdesk.console.jobs.job_detail import monospace
from jobdesk.console.tasks import spawn
from jobdesk.console.theme import is_dark
from jobdesk.console.workers.launched_worker import MAX_LINES, LaunchedWorker, WorkerLauncher
from jobdesk.console.workers.worker_log import LEVELS, LogLine, record_level

FILTER_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
EMPTY_TEXT = "No worker launched from this console yet. “Launch worker” starts one on this database."


class LevelHighlighter(QSyntaxHighlighter):
    """Warnings in amber and errors in red, tracebacks included (they follow their record)."""

    def highlightBlock(self, text: str) -> None:  # noqa: N802
        previous = self.previousBlockState()
        level = record_level(text)
        if level is None:
            level = previous if previous >= 0 else logging.INFO
        self.setCurrentBlockState(level)
        if level >= logging.ERROR:
            colour = "#ff7b72" if is_dark() else "#cf222e"
        elif level >= logging.WARNING:
            colour = "#d29922" if is_dark() else "#9a6700"
        else:
            return
        fmt = QTextCharFormat()
        fmt.setForeground(QColor(colour))
        self.setFormat(0, len(text), fmt)


class WorkerLogDock(QDockWidget):
    """Shows one launched worker's log at a time."""

    def __init__(self, launcher: WorkerLauncher, parent: QWidget | None = None) -> None:
        super().__init__("Worker log", parent)
        self.setObjectName("workerLogDock")
        self.launcher = launcher

        self.selector = QComboBox()
        self.selector.setMinimumContentsLength(28)
        self.selector.currentIndexChanged.connect(lambda _i: self._switched())
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("Stop this worker: running jobs may finish first (SIGTERM)")
        self.stop_button.clicked.connect(self._stop_clicked)
        self.restart_button = QPushButton("Restart")
        self.restart_button.setToolTip("Stop this worker gracefully, then start it again")
        self.restart_button.clicked.connect(self._restart_clicked)
        self.level_combo = QComboBox()
        self.level_combo.addItems(list(FILTER_LEVELS))
        self.level_combo.setToolTip("Show lines of this level and above")
        self.level_combo.currentIndexChanged.connect(lambda _i: self._rebuild())
        self.search_edit = QLineEdit()
        self.search_edit.setPlaceholderText("search the log")
        self.search_edit.setClearButtonEnabled(True)
        self.search_edit.textChanged.connect(lambda _t: self._rebuild())
        self.view = QPlainTextEdit()
        self.view.setReadOnly(True)
        self.view.setFont(monospace())
        self.view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.view.setMaximumBlockCount(MAX_LINES)
        self.view.setPlaceholderText(EMPTY_TEXT)
        self.highlighter = LevelHighlighter(self.view.document())

        bar = QHBoxLayout()
        bar.addWidget(self.selector)
        bar.addWidget(self.stop_button)
        bar.addWidget(self.restart_button)
        bar.addStretch(1)
        bar.addWidget(QLabel("Level"))
        bar.addWidget(self.level_combo)
        bar.addWidget(self.search_edit)
        body = QWidget()
        layout = QVBoxLayout(body)
        layout.setContentsMargins(6, 4, 6, 6)
        layout.addLayout(bar)
        layout.addWidget(self.view, 1)
        self.setWidget(body)

        launcher.added.connect(self._added)
        launcher.changed.connect(self._update_controls)
        for worker in launcher.workers:
            self._added(worker)
        self._update_controls()

    # -- which worker -----------------------------------------------------------------------

    def current(self) -> LaunchedWorker | None:
        number = self.selector.currentData()
        return next((w for w in self.launcher.workers if w.number == number), None)

    def show_worker(self, worker: LaunchedWorker) -> None:
        index = self.selector.findData(worker.number)
        if index >= 0:
            self.selector.setCurrentIndex(index)
        self.show()

    def _added(self, worker: LaunchedWorker) -> None:
        worker.output.connect(lambda lines, w=worker: self._on_output(w, lines))
        self.selector.addItem(worker.label(), worker.number)
        self.selector.setCurrentIndex(self.selector.count() - 1)

    def _switched(self) -> None:
        self._rebuild()
        self._update_controls()

    # -- filtering --------------------------------------------------------------------------

    @property
    def min_level(self) -> int:
        return LEVELS[self.level_combo.currentText()]

    def set_filter(self, level: str | None = None, search: str | None = None) -> None:
        if level is not None:
            self.level_combo.setCurrentText(level)
        if search is not None:
            self.search_edit.setText(search)

    def accepts(self, line: LogLine) -> bool:
        needle = self.search_edit.text().strip().lower()
        return line.level >= self.min_level and (not needle or needle in line.text.lower())

    def shown_lines(self) -> list[str]:
        text = self.view.toPlainText()
        return text.split("\n") if text else []

    def _rebuild(self) -> None:
        worker = self.current()
        lines = [line.text for line in worker.lines if self.accepts(line)] if worker is not None else []
        self.view.setPlainText("\n".join(lines))
        bar = self.view.verticalScrollBar()
        bar.setValue(bar.maximum())

    def _on_output(self, worker: LaunchedWorker, lines: list[LogLine]) -> None:
        if worker is not self.current():
            return
        shown = [line.text for line in lines if self.accepts(line)]
        if shown:
            self.view.appendPlainText("\n".join(shown))

    # -- stop and restart -------------------------------------------------------------------

    def _stop_clicked(self) -> None:
        worker = self.current()
        if worker is not None:
            spawn(worker.stop(), f"stop-worker-{worker.number}")

    def _restart_clicked(self) -> None:
        worker = self.current()
        if worker is not None:
            spawn(worker.restart(), f"restart-worker-{worker.number}")

    def _update_controls(self) -> None:
        for i in range(self.selector.count()):
            worker = next((w for w in self.launcher.workers if w.number == self.selector.itemData(i)), None)
            if worker is not None:
                self.selector.setItemText(i, worker.label())
        worker = self.current()
        idle = worker is None or worker.left_running or worker.stopping
        self.stop_button.setEnabled(not idle and worker is not None and worker.is_running)
        self.restart_button.setEnabled(not idle)
        self.selector.setEnabled(self.selector.count() > 0)

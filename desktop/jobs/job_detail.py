"""Detail panes of the selected job: metadata and progress, input and result JSON, error, attempt
history, dependencies, a durable processor's stored steps, the job's own log lines, and its stack. Large JSON
documents are shown lazily and truncated, so they never freeze the UI."""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import (
    QFormLayout,
    QLabel,
    QPlainTextEdit,
    QSplitter,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from jobdesk.console.jobs.attempt_table import attempts_table, retries_text, runs_text, show_attempts, worker_of
from jobdesk.console.jobs.attempt_timeline import AttemptTimeline, marks, segments
from jobdesk.console.jobs.job_logs_view import JobLogsView
from jobdesk.console.jobs.job_progress import ProgressField
from jobdesk.console.jobs.job_stack_view import JobStackView
from jobdesk.console.jobs.step_list import StepTable
from jobdesk.console.table_model import Query
from jobdesk.console.theme import STATUS_COLOURS, status_label
from jobdesk.core.json_value import JsonObject, JsonValue
from jobdesk.core.models import JobRecord, Status, short_id
from jobdesk.core.timefmt import relative
from jobdesk.service import jobs as service
from jobdesk.store.waiting import WaitingReason

SUSPENDED_KINDS = {"sleeping": "sleeping", "event": "waiting for an event", "children": "waiting for child jobs"}
RAW_LIMIT = 200_000  # characters of raw JSON shown; the rest is cut with a note
CHILD_LIMIT = 500  # children shown per JSON node


def monospace() -> QFont:
    return QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)


class JsonView(QWidget):
    """An expandable JSON tree (children built on first expand) over a raw, copyable text view."""

    def __init__(self) -> None:
        super().__init__()
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Key", "Value"])
        self.tree.setColumnWidth(0, 180)
        self.tree.itemExpanded.connect(self._expand)
        self.raw = QPlainTextEdit()
        self.raw.setReadOnly(True)
        self.raw.setFont(monospace())
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.tree)
        split.addWidget(self.raw)
        split.setSizes([300, 120])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(split)
        self._values: dict[int, JsonObject | list[JsonValue]] = {}

    def show_value(self, value: JsonValue) -> None:
        self.tree.clear()
        self._values.clear()
        if value is None:
            self.raw.setPlainText("(none)")
            return
        if isinstance(value, (dict, list)):
            self._add_children(self.tree.invisibleRootItem(), value)
        else:  # a bare number, string or boolean (result_data is any JSON written by SQL): one row
            QTreeWidgetItem(self.tree.invisibleRootItem(), ["(value)", _summary(value)])
        text = json.dumps(value, indent=2, ensure_ascii=False)
        if len(text) > RAW_LIMIT:
            text = text[:RAW_LIMIT] + f"\n… cut: {len(text) - RAW_LIMIT:,} more characters"
        self.raw.setPlainText(text)

    def _add_children(self, parent: QTreeWidgetItem, value: JsonObject | list[JsonValue]) -> None:
        items: list[tuple[object, JsonValue]] = (list(value.items()) if isinstance(value, dict)
                                                 else list(enumerate(value)))
        for key, child in items[:CHILD_LIMIT]:
            item = QTreeWidgetItem(parent, [str(key), _summary(child)])
            if isinstance(child, (dict, list)) and child:
                self._values[id(item)] = child
                QTreeWidgetItem(item, ["…", ""])  # placeholder until expanded
        if len(items) > CHILD_LIMIT:
            QTreeWidgetItem(parent, ["…", f"{len(items) - CHILD_LIMIT:,} more (see the raw view)"])

    def _expand(self, item: QTreeWidgetItem) -> None:
        value = self._values.pop(id(item), None)
        if value is None:
            return
        item.takeChildren()
        self._add_children(item, value)


def _summary(value: JsonValue) -> str:
    if isinstance(value, dict):
        return f"{{{len(value)} keys}}"
    if isinstance(value, list):
        return f"[{len(value)} items]"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 200 else text[:200] + "…"


class JobDetail(QWidget):
    """Everything about one job. `job_link_clicked` carries the id of a linked job."""

    job_link_clicked = Signal(str)
    pipeline_link_clicked = Signal(str)  # show the pipeline's jobs in the table
    pipeline_graph_clicked = Signal(str)  # show the pipeline's DAG

    def __init__(self, query: Query | None = None) -> None:
        """`query` runs the Logs tab's reads through the service (without it the tab stays empty)."""
        super().__init__()
        self.title = QLabel("Select a job")
        self.title.setObjectName("detailTitle")
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.title.setWordWrap(True)  # the id goes under the type rather than past the pane's edge
        self.meta = QFormLayout()
        self.meta_labels: dict[str, QLabel] = {}
        for key in ("Status", "Type", "Pipeline", "User", "Runs", "Retries", "Created", "Started", "Finished",
                    "Next retry", "Scheduled", "Waiting", "Worker", "Depends on", "Dependants"):
            label = QLabel("")
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
            label.setWordWrap(True)
            label.linkActivated.connect(self._link)
            self.meta_labels[key] = label
            self.meta.addRow(key, label)
        self.progress = ProgressField()
        self.meta.insertRow(1, "Progress", self.progress)  # under the status it details
        self.input_view = JsonView()
        self.result_view = JsonView()
        self.error_view = QPlainTextEdit()
        self.error_view.setReadOnly(True)
        self.error_view.setFont(monospace())
        self.history = attempts_table()
        self.tabs = QTabWidget()
        self.tabs.addTab(self.input_view, "Input")
        self.tabs.addTab(self.result_view, "Result")
        self.tabs.addTab(self.error_view, "Error")
        self.timeline = AttemptTimeline()
        history_box = QWidget()
        history_layout = QVBoxLayout(history_box)
        history_layout.setContentsMargins(0, 4, 0, 0)
        history_layout.addWidget(self.timeline)
        history_layout.addWidget(self.history, 1)
        self.tabs.addTab(history_box, "History")
        self.steps = StepTable()
        self.step_result = JsonView()
        self.steps.itemSelectionChanged.connect(self._step_selected)
        steps_box = QSplitter(Qt.Orientation.Vertical)
        steps_box.addWidget(self.steps)
        steps_box.addWidget(self.step_result)
        steps_box.setSizes([200, 220])
        self.steps_box = steps_box
        self.tabs.insertTab(self.tabs.indexOf(history_box), steps_box, "Steps")  # History stays last
        self.logs = JobLogsView(query, on_count=self._logs_counted)
        self.tabs.insertTab(self.tabs.indexOf(history_box), self.logs, "Logs")
        self.stack = JobStackView(query)  # what the running job is doing now, asked when shown
        self.tabs.insertTab(self.tabs.indexOf(history_box), self.stack, "Stack")
        meta_box = QWidget()
        meta_box.setLayout(self.meta)
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(meta_box)
        layout.addWidget(self.tabs, 1)
        self.job_id: str | None = None
        self.record: JobRecord | None = None  # the job shown: what the Failures tab's actions act on

    def clear(self) -> None:
        self.job_id = None
        self.title.setText("Select a job")
        for label in self.meta_labels.values():
            label.setText("")
        self.input_view.show_value(None)
        self.result_view.show_value(None)
        self.error_view.setPlainText("")
        self.history.setRowCount(0)
        self.timeline.show_segments([])
        self._show_steps(None)
        self.progress.show_progress(None)
        self.logs.clear()
        self.stack.clear()
        self.record = None

    def show_job(self, detail: service.JobDetail) -> None:
        record, attempts, dependants = detail.job, detail.attempts, detail.dependants
        now = datetime.now(UTC)
        self.job_id = record.id
        self.record = record
        self.title.setText(f"<big><b>{html.escape(record.type)}</b></big><br><code>{record.id}</code>")
        background, foreground = STATUS_COLOURS[record.status]
        inactive = "" if record.is_active or record.status.value == "cancelled" else " (cancel requested)"
        if detail.waiting is not None and detail.waiting.kind in SUSPENDED_KINDS:
            inactive = f" suspended: {SUSPENDED_KINDS[detail.waiting.kind]}"
        self._set("Status", f"<span style='background:{background}; color:{foreground}; padding:2px 6px;'>"
                            f"&nbsp;{status_label(record.status)}&nbsp;</span>{inactive}")
        self._set("Type", record.type)
        self._set("Pipeline", f"<a href='pipeline:{record.pipeline_id}'>{short_id(record.pipeline_id)}</a>"
                              f" · <a href='graph:{record.pipeline_id}'>graph</a>" if record.pipeline_id else "—")
        self._set("User", str(record.user_id))
        self.progress.show_progress(detail.progress, now)
        self._set("Runs", runs_text(record.attempts, attempts))
        self._set("Retries", retries_text(record.retry_count))
        self._set("Created", _when(record.created_at, now))
        self._set("Started", _when(record.started_at, now))
        finished = record.completed_at or (record.updated_at if record.status.value in ("failed", "cancelled")
                                           else None)
        self._set("Finished", _when(finished, now))
        self._set("Next retry", _when(record.next_retry_at, now) if record.status.value == "queued" else "—")
        self._set("Scheduled", _when(record.scheduled_at, now))
        self._set("Waiting", _waiting(detail.waiting, record, now))
        self._set("Worker", html.escape(worker_of(record, attempts)))
        self._set("Depends on", ", ".join(_link(d) for d in record.dependent_on_jobs) or "—")
        self._set("Dependants", ", ".join(_link(d) for d in dependants) or "—")
        self.input_view.show_value(record.input_data)
        self.result_view.show_value(record.result_data)
        last_trace = next((a.traceback for a in reversed(attempts) if a.traceback), None)
        if last_trace and record.error_message and record.error_message in last_trace:
            error_text = last_trace  # the traceback ends with the error itself
        else:
            error_text = "\n\n".join(t for t in (record.error_message, last_trace) if t)
        self.error_view.setPlainText(error_text or "(no error)")
        wake_at = detail.waiting.at if detail.waiting is not None else None
        self.timeline.show_segments(segments(record, attempts, now, wake_at), marks(detail.steps))
        self._show_steps(detail)
        self.logs.show_job(record.id, record.status)
        self.stack.show_job(record.id, record.status)
        show_attempts(self.history, attempts)
        if record.error_message and self.tabs.currentIndex() == 0 and record.status.value == "failed":
            self.tabs.setCurrentWidget(self.error_view)

    def _show_steps(self, detail: service.JobDetail | None) -> None:
        steps = detail.steps if detail is not None else []
        self.steps.show_steps(steps, datetime.now(UTC))
        count = len(steps)
        self.tabs.setTabText(self.tabs.indexOf(self.steps_box), f"Steps ({count})" if count else "Steps")
        if count:  # the latest step, and its result at once (selectRow may find it selected already)
            self.steps.selectRow(count - 1)
        self.step_result.show_value(self.steps.results[-1] if count else None)

    def _logs_counted(self, count: int) -> None:
        self.tabs.setTabText(self.tabs.indexOf(self.logs), f"Logs ({count})" if count else "Logs")

    def _step_selected(self) -> None:
        rows = {index.row() for index in self.steps.selectedIndexes()}
        if len(rows) == 1:
            self.step_result.show_value(self.steps.results[rows.pop()])

    def _link(self, href: str) -> None:
        if href.startswith("pipeline:"):
            self.pipeline_link_clicked.emit(href.removeprefix("pipeline:"))
        elif href.startswith("graph:"):
            self.pipeline_graph_clicked.emit(href.removeprefix("graph:"))
        else:
            self.job_link_clicked.emit(href)

    def _set(self, key: str, html: str) -> None:
        self.meta_labels[key].setText(html)


def _waiting(why: WaitingReason | None, record: JobRecord, now: datetime) -> str:
    """What the job waits for: why a queued job has not started (the jobs it waits for are
    links), or the approval a job that ran waits for."""
    if why is None:
        if record.status == Status.WAITING_APPROVAL:
            return f"waits for approval (since {relative(record.updated_at, now)})"
        return "—"
    if why.kind == "dependencies":
        noun = "dependency" if len(why.dependencies) == 1 else "dependencies"
        return f"waiting for {len(why.dependencies)} {noun}: " + ", ".join(_link(d) for d in why.dependencies)
    return html.escape(why.text)


def _link(job_id: str) -> str:
    return f"<a href='{job_id}'>{short_id(job_id)}</a>"


def _when(value: datetime | None, now: datetime) -> str:
    if value is None:
        return "—"
    return f"{value.astimezone().strftime('%Y-%m-%d %H:%M:%S')} ({relative(value, now)})"

"""The stored steps of a durable processor's job, as a table in the detail pane: the step's name,
the attempt it finished in, when, how long it took, and its result as compact JSON. Checkpoints
(names starting with "@": the sleeps, the waits for events and child jobs, the spawns) are listed
too, muted. The full result of the selected step is shown by the detail pane's JSON viewer."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from jobdesk.core.json_value import JsonValue
from jobdesk.core.timefmt import relative, span

COMPACT_LIMIT = 160  # characters of a result shown in its cell
COLUMNS = ["Step", "Attempt", "Finished", "Duration", "Result"]
COL_STEP, COL_ATTEMPT, COL_FINISHED, COL_DURATION, COL_RESULT = range(len(COLUMNS))
MUTED = QColor("#8c959f")


class StoredStep(Protocol):
    """What the table shows of a stored step (`JobDetail.steps`)."""

    @property
    def name(self) -> str: ...
    @property
    def result(self) -> JsonValue: ...
    @property
    def attempt(self) -> int: ...
    @property
    def finished_at(self) -> datetime: ...
    @property
    def duration_s(self) -> float: ...


def is_checkpoint(name: str) -> bool:
    """A step the engine stores for a sleep, a wait or a spawn ("@sleep 1", "@event 1", …)."""
    return name.startswith("@")


def compact(value: JsonValue) -> str:
    """A result on one line, cut to COMPACT_LIMIT characters."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= COMPACT_LIMIT else text[:COMPACT_LIMIT] + "…"


class StepTable(QTableWidget):
    """One row per stored step, in the order they finished; `results[row]` is the row's full result."""

    def __init__(self) -> None:
        super().__init__(0, len(COLUMNS))
        self.setHorizontalHeaderLabels(COLUMNS)
        header = self.horizontalHeader()
        header.setStretchLastSection(True)
        for col in (COL_STEP, COL_ATTEMPT, COL_FINISHED, COL_DURATION):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        self.verticalHeader().hide()
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)
        self.setWordWrap(False)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.results: list[JsonValue] = []
        self.names: list[str] = []

    def show_steps(self, steps: Sequence[StoredStep], now: datetime) -> None:
        self.clearSelection()
        self.setRowCount(len(steps))
        self.results = [s.result for s in steps]
        self.names = [s.name for s in steps]
        for row, step in enumerate(steps):
            finished = step.finished_at.astimezone()
            cells = [step.name, str(step.attempt), f"{finished:%H:%M:%S} ({relative(step.finished_at, now)})",
                     span(step.duration_s), compact(step.result)]
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if col == COL_FINISHED:
                    item.setToolTip(f"{finished:%Y-%m-%d %H:%M:%S}")
                elif col == COL_RESULT:
                    item.setToolTip("select the step to see its whole result below")
                if is_checkpoint(step.name):
                    item.setForeground(QBrush(MUTED))
                    font = QFont(self.font())
                    font.setItalic(True)
                    item.setFont(font)
                self.setItem(row, col, item)

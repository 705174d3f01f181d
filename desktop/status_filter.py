"""A row of checkable status buttons: "All", then one per status. Checking a status unchecks
"All"; unchecking the last one, or clicking "All", goes back to everything. The job table and
the pipeline list filter with one each."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from PySide6.QtWidgets import QHBoxLayout, QToolButton

S = TypeVar("S")


def status_buttons(colours: Mapping[S, str], layout: QHBoxLayout, on_change: Callable[[], None],
                   label: Callable[[S], str] | None = None) -> dict[S | None, QToolButton]:
    """Add the buttons to `layout` ("All" first, checked); `colours` gives each status's colour,
    `label` its text (else the caller sets the texts). `on_change` runs after every click."""
    buttons: dict[S | None, QToolButton] = {}

    def clicked(status: S | None) -> None:
        if status is None:
            for s, button in buttons.items():
                button.setChecked(s is None)
        else:
            buttons[None].setChecked(not checked(buttons))
        on_change()

    for status in (None, *colours):
        button = QToolButton()
        button.setCheckable(True)
        button.setObjectName("statusFilter")
        if status is None:
            button.setText("All")
        else:
            button.setProperty("status", str(status))
            button.setStyleSheet(f"QToolButton:checked {{ border-bottom: 3px solid {colours[status]}; }}")
            if label is not None:
                button.setText(label(status))
        button.clicked.connect(lambda _checked=False, s=status: clicked(s))
        buttons[status] = button
        layout.addWidget(button)
    buttons[None].setChecked(True)
    return buttons


def checked(buttons: Mapping[S | None, QToolButton]) -> frozenset[S]:
    """The statuses checked; empty means all."""
    return frozenset(s for s, b in buttons.items() if s is not None and b.isChecked())

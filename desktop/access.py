"""How a read-only console shows its actions: every one stays where it is, disabled, and its
tooltip says why ("Read-only: role viewer cannot change jobs"), the same words on the toolbar, in
the context menus, on the tabs' buttons and in the docks. The reason is the connection's
(`ConsoleConnection.read_only_reason`): the database role, a standby, or `--read-only`."""

from __future__ import annotations

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QAbstractButton, QMenu


def read_only_tip(reason: str) -> str:
    return f"Read-only: {reason}"


def gate(target: QAction | QAbstractButton, allowed: bool, reason: str | None, tip: str | None = None) -> None:
    """Enable `target` where `allowed` and the console may act. While it may not, it is disabled
    and its tooltip says why; otherwise the tooltip is `tip` (its own), when given."""
    target.setEnabled(allowed and reason is None)
    if reason is not None:
        target.setToolTip(read_only_tip(reason))
    elif tip is not None:
        target.setToolTip(tip)


def gate_menu(menu: QMenu, actions: list[QAction], allowed: list[bool], reason: str | None) -> None:
    """`gate` for the actions of a context menu, whose tooltips show on hover."""
    menu.setToolTipsVisible(True)
    for action, ok in zip(actions, allowed, strict=True):
        gate(action, ok, reason)

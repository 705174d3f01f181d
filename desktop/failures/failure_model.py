"""The Failures tab's list: one row per failure group (`worker.failure_queries.FailureGroup`)."""

from __future__ import annotations

from datetime import UTC, datetime

from PySide6.QtCore import Qt

from jobdesk.console.table_model import Index, RowsTableModel
from jobdesk.core.timefmt import relative
from jobdesk.store.failures import FailureGroup

# The error last: it is the widest, and the last column stretches.
COLUMNS = ("Failed jobs", "Attempts 24 h", "Types", "First seen", "Last seen", "Error")
COL_FAILED, COL_ATTEMPTS, COL_TYPES, COL_FIRST, COL_LAST, COL_ERROR = range(len(COLUMNS))
GROUP_ROLE = Qt.ItemDataRole.UserRole + 1  # the FailureGroup of a row


class FailureGroupModel(RowsTableModel):
    headers = COLUMNS

    def __init__(self) -> None:
        super().__init__()
        self._rows: list[FailureGroup] = []
        self.now = datetime.now(UTC)

    def set_groups(self, groups: list[FailureGroup]) -> None:
        """Replace the groups (the whole list is one small query, so a reset is right here)."""
        self.beginResetModel()
        self._rows = list(groups)
        self.now = datetime.now(UTC)
        self.endResetModel()

    def row_of(self, fingerprint: str) -> int | None:
        return next((i for i, g in enumerate(self._rows) if g.fingerprint == fingerprint), None)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        group = self._rows[index.row()]
        col = index.column()
        if role == GROUP_ROLE:
            return group
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(group, col)
        if role == Qt.ItemDataRole.ToolTipRole:
            if col == COL_ERROR:
                return group.fingerprint
            if col in (COL_FIRST, COL_LAST):
                when = group.first_seen if col == COL_FIRST else group.last_seen
                return f"{when:%Y-%m-%d %H:%M:%S %Z}" if when else None
            if col == COL_TYPES:
                return ", ".join(group.types)
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (COL_FAILED, COL_ATTEMPTS):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def _text(self, group: FailureGroup, col: int) -> str:
        if col == COL_ERROR:
            return group.fingerprint
        if col == COL_FAILED:
            return f"{group.failed_jobs:,}"
        if col == COL_ATTEMPTS:
            return f"{group.attempts:,}"
        if col == COL_TYPES:
            shown = ", ".join(group.types[:3])
            return shown + (f" +{len(group.types) - 3}" if len(group.types) > 3 else "")
        if col == COL_FIRST:
            return relative(group.first_seen, self.now)
        if col == COL_LAST:
            return relative(group.last_seen, self.now)
        return ""


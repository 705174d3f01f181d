"""The Limits table under the workers: each limit on the claims (a rate, a limit per user, fair
share, a limit per type), its use now and how many runnable jobs it holds back. Hidden while no
limit is set."""

from __future__ import annotations

from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem, QWidget

from jobdesk.core.limits import LimitUse, next_start_text

HEADERS = ("Type", "Limit", "In use now", "Held back", "Next start")
MAX_ROWS_SHOWN = 8  # the table grows with its rows up to this many, then scrolls


def _limit_text(use: LimitUse) -> str:
    """`rate 10/s`, `rate 2/s per user`, `1 running per user`, `2 running (type limit)`, `fair share`."""
    if use.kind in ("rate", "user_rate"):
        return f"rate {use.limit}"
    return f"{use.limit} (type limit)" if use.kind == "type_running" else use.limit


def _next_start(use: LimitUse) -> str:
    return "" if use.next_start_s is None else next_start_text(use.next_start_s)


class LimitsTable(QTableWidget):
    """One row per limit; `show_uses` replaces them."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, len(HEADERS), parent)
        self.setObjectName("limitsTable")
        self.setHorizontalHeaderLabels(HEADERS)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.verticalHeader().hide()
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.horizontalHeader().setStretchLastSection(True)
        self.hide()

    def show_uses(self, uses: list[LimitUse]) -> None:
        self.setRowCount(len(uses))
        for row, use in enumerate(uses):
            cells = (use.type, _limit_text(use), use.in_use, f"{use.held:,}" if use.kind != "fair_share" else "",
                     _next_start(use))
            for col, text in enumerate(cells):
                self.setItem(row, col, QTableWidgetItem(text))
        # Every limit in sight without scrolling, up to MAX_ROWS_SHOWN of them.
        shown = min(len(uses), MAX_ROWS_SHOWN)
        self.setFixedHeight(self.horizontalHeader().height() + 2 * self.frameWidth()
                            + sum(self.rowHeight(r) for r in range(shown)))
        self.setVisible(bool(uses))

    def rows(self) -> list[tuple[str, ...]]:
        """The table as text, row by row."""
        def text(r: int, c: int) -> str:
            item = self.item(r, c)
            return item.text() if item is not None else ""
        return [tuple(text(r, c) for c in range(self.columnCount())) for r in range(self.rowCount())]

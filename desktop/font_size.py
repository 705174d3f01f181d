"""Text size: the system's font, made larger or smaller by the user (Ctrl+= and Ctrl+-, Ctrl+0
back to the system's size), remembered in the user's settings.

The size is the application's font, so every widget without a font of its own follows it; the
tables then widen their columns by as much as a digit widened and take rows as tall as the new
font needs (`refit_tables`), keeping any width the user dragged in proportion."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction, QFont, QFontDatabase, QKeySequence
from PySide6.QtWidgets import QApplication, QHeaderView, QTableView, QWidget

from jobdesk.console.column_prefs import console_settings
from jobdesk.console.list_table import ROW_PADDING, digit_width, row_height
from jobdesk.console.theme import set_text_size

SETTING = "appearance/font_step"  # points added to the system's size (negative: smaller)
SMALLEST, LARGEST = -4, 12  # steps, in points
MIN_POINTS = 6.0


def system_points() -> float:
    """The system's font size in points (what the platform theme gives; 9 where it gives none)."""
    size = QFontDatabase.systemFont(QFontDatabase.SystemFont.GeneralFont).pointSizeF()
    return size if size > 0 else 9.0


class FontSize(QObject):
    """The window's text-size actions and the size they set."""

    changed = Signal(float)  # the new size, in points

    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self.window = window
        self.base = system_points()
        stored = console_settings().value(SETTING, 0, type=int)
        self.step = min(max(int(stored), SMALLEST), LARGEST)  # type: ignore[call-overload]
        self.larger_action = self._action("Larger text", [QKeySequence("Ctrl+="), QKeySequence("Ctrl++")], +1)
        self.smaller_action = self._action("Smaller text", [QKeySequence("Ctrl+-")], -1)
        self.reset_action = self._action("System text size", [QKeySequence("Ctrl+0")], 0)
        self.apply()

    def _action(self, text: str, keys: list[QKeySequence], step: int) -> QAction:
        action = QAction(text, self.window)
        action.setShortcuts(keys)
        action.setToolTip(f"{text} ({keys[0].toString(QKeySequence.SequenceFormat.NativeText)})")
        action.triggered.connect(lambda: self.change(step))
        self.window.addAction(action)  # a window shortcut, wherever the focus is
        return action

    @property
    def points(self) -> float:
        return max(MIN_POINTS, self.base + self.step)

    def change(self, step: int) -> None:
        """One point larger (+1) or smaller (-1), or back to the system's size (0); remembered."""
        self.step = 0 if step == 0 else min(max(self.step + step, SMALLEST), LARGEST)
        settings = console_settings()
        settings.setValue(SETTING, self.step)
        settings.sync()
        self.apply()

    def apply(self) -> None:
        app = QApplication.instance()
        if not isinstance(app, QApplication):
            return
        old = {id(t): digit_width(t) for t in self.window.findChildren(QTableView)}
        font = QFont(app.font())
        font.setPointSizeF(self.points)
        app.setFont(font)  # for the windows and dialogs opened from now on
        # ...and for this one now: the application's font reaches open windows only from its event loop.
        self.window.setFont(font)
        set_text_size(app, self.points)
        refit_tables(self.window, old)
        self.smaller_action.setEnabled(self.step > SMALLEST and self.points > MIN_POINTS)
        self.larger_action.setEnabled(self.step < LARGEST)
        self.changed.emit(self.points)


def refit_tables(window: QWidget, old_digits: dict[int, float]) -> None:
    """Widen (or narrow) every table's columns by as much as a digit changed, and fit its rows."""
    for table in window.findChildren(QTableView):
        before, after = old_digits.get(id(table)), digit_width(table)
        header = table.horizontalHeader()
        if before and abs(after - before) > 0.01:
            for col in range(header.count()):
                if header.sectionResizeMode(col) == QHeaderView.ResizeMode.Interactive \
                        and not header.isSectionHidden(col):
                    header.resizeSection(col, round(header.sectionSize(col) * after / before))
        padding = table.property("rowPadding")
        table.verticalHeader().setDefaultSectionSize(
            row_height(table, int(padding) if padding is not None else ROW_PADDING - 4))

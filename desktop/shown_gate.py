"""A tab's live work, done only while the tab is on screen.

A busy queue changes jobs many times a second. A tab nobody looks at should not query the
database for each change, nor repaint its "3 s ago" cells every second. `ShownGate` watches the
tab's show and hide events, and its window's minimising: while the tab is hidden or its window
minimised, a change only marks it stale and its clocks stop; once it is on screen again, its
clocks run and, if it is stale, it is read again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QWidget


def on_screen(widget: QWidget) -> bool:
    """Whether the widget can be seen: shown, in a window that is not minimised."""
    return widget.isVisible() and not widget.window().isMinimized()


class ShownGate(QObject):
    def __init__(self, tab: QWidget, refresh: Callable[[], None], *, active: Callable[[], bool],
                 clocks: Sequence[QTimer] = ()) -> None:
        super().__init__(tab)
        self.tab = tab
        self._refresh = refresh  # reads the tab again
        self._active = active  # whether there is a database to read from
        self.clocks = list(clocks)
        self.stale = True  # the tab missed changes while hidden (or was never read)
        self._window: QWidget | None = None  # whose minimising is watched, once the tab is in one
        if not tab.isVisible():
            for clock in self.clocks:
                clock.stop()
        tab.installEventFilter(self)
        self._watch_window()

    def shown(self) -> bool:
        """Whether a change should be applied now: True while the tab is on screen. Otherwise the
        tab is marked stale, to be read again when it is shown."""
        if on_screen(self.tab):
            return True
        self.stale = True
        return False

    def refresh(self) -> None:
        """Read the tab now, if it is shown; else mark it stale."""
        if self.shown():
            self.stale = False
            self._refresh()

    def _watch_window(self) -> None:
        window = self.tab.window()
        if window is not self.tab and window is not self._window:
            if self._window is not None:
                self._window.removeEventFilter(self)
            self._window = window
            window.installEventFilter(self)

    def _on_screen_again(self) -> None:
        for clock in self.clocks:
            clock.start()
        if self.stale and self._active():
            self.refresh()

    def _off_screen(self) -> None:
        for clock in self.clocks:
            clock.stop()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        kind = event.type()
        if watched is self.tab:
            if kind == QEvent.Type.Show:
                self._watch_window()
                if on_screen(self.tab):
                    self._on_screen_again()
            elif kind == QEvent.Type.Hide:
                self._off_screen()
        elif watched is self._window and kind == QEvent.Type.WindowStateChange:
            if on_screen(self.tab):
                self._on_screen_again()
            else:
                self._off_screen()
        return False

"""A tab's live work, done only while the tab is shown.

A busy queue changes jobs many times a second. A tab nobody looks at should not query the
database for each change, nor repaint its "3 s ago" cells every second. `ShownGate` watches the
tab's show and hide events: while the tab is hidden, a change only marks it stale and its clocks
stop; once it is shown again, its clocks run and, if it is stale, it is read again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QWidget


class ShownGate(QObject):
    def __init__(self, tab: QWidget, refresh: Callable[[], None], *, active: Callable[[], bool],
                 clocks: Sequence[QTimer] = ()) -> None:
        super().__init__(tab)
        self.tab = tab
        self._refresh = refresh  # reads the tab again
        self._active = active  # whether there is a database to read from
        self.clocks = list(clocks)
        self.stale = True  # the tab missed changes while hidden (or was never read)
        if not tab.isVisible():
            for clock in self.clocks:
                clock.stop()
        tab.installEventFilter(self)

    def shown(self) -> bool:
        """Whether a change should be applied now: True while the tab is shown. Otherwise the tab
        is marked stale, to be read again when it is shown."""
        if self.tab.isVisible():
            return True
        self.stale = True
        return False

    def refresh(self) -> None:
        """Read the tab now, if it is shown; else mark it stale."""
        if self.shown():
            self.stale = False
            self._refresh()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        if watched is self.tab:
            if event.type() == QEvent.Type.Show:
                for clock in self.clocks:
                    clock.start()
                if self.stale and self._active():
                    self.refresh()
            elif event.type() == QEvent.Type.Hide:
                for clock in self.clocks:
                    clock.stop()
        return False

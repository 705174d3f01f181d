"""The window's status bar, whose passing messages never run over its permanent text.

QStatusBar paints a temporary message itself, from the left edge, and a message longer than the
room before the permanent labels (the table's size, the replica's lag, the failure counts) is
drawn over them. Here the message is a label in the bar's layout, beside those labels: it gets
the room that is left, cut with "…" where it does not fit, the whole of it in its tooltip."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QStatusBar

from jobdesk.console.access import read_only_tip


class ElidedLabel(QLabel):
    """One line of plain text, elided at the right to the label's width."""

    def __init__(self) -> None:
        super().__init__()
        self.full_text = ""
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(40)
        self.setTextFormat(Qt.TextFormat.PlainText)

    def set_full_text(self, text: str) -> None:
        self.full_text = text
        self.setToolTip(text if text else "")
        self._elide()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        self.setText(self.fontMetrics().elidedText(self.full_text, Qt.TextElideMode.ElideRight, max(0, self.width())))


class StatusBar(QStatusBar):
    """`showMessage` puts the text in its own label, which the permanent widgets sit beside. At
    its left, the "read-only" sign while the console cannot act, its tooltip saying why."""

    def __init__(self) -> None:
        super().__init__()
        self.read_only = QLabel("read-only")
        self.read_only.setObjectName("readOnly")
        self.read_only.setVisible(False)
        self.addWidget(self.read_only)
        self.message = ElidedLabel()
        self.message.setObjectName("statusMessage")
        self.addWidget(self.message, 1)
        self._clear = QTimer(self, singleShot=True)
        self._clear.timeout.connect(self.clearMessage)

    def show_read_only(self, reason: str | None) -> None:
        """The read-only sign, saying why in its tooltip; hidden with None."""
        self.read_only.setVisible(reason is not None)
        self.read_only.setToolTip(f"{read_only_tip(reason)}; every action is off" if reason is not None else "")

    def showMessage(self, text: str, timeout: int | None = 0) -> None:  # noqa: N802
        self.message.set_full_text(text)
        if timeout:
            self._clear.start(timeout)
        else:
            self._clear.stop()

    def currentMessage(self) -> str:  # noqa: N802
        return self.message.full_text

    def clearMessage(self) -> None:  # noqa: N802
        self._clear.stop()
        self.message.set_full_text("")

"""Where notices and the attention counts show: a tray icon (`QSystemTrayIcon`) with the counts
in its tooltip and a badge, and its balloon messages; without a system tray (offscreen, some
desktops) a status-bar label whose link opens what the notice is about."""

from __future__ import annotations

from PySide6.QtCore import QObject, QRect, Qt, Signal
from PySide6.QtGui import QAction, QColor, QFont, QIcon, QPainter, QPixmap
from PySide6.QtWidgets import QLabel, QMenu, QStatusBar, QSystemTrayIcon, QWidget

from jobdesk.console.notify.notifier import Notice, NotificationSettings
from jobdesk.console.theme import icon
from jobdesk.store.stats import Attention


def badge_icon(base: QIcon, count: int) -> QIcon:
    """The app icon with a red count in its corner (none for 0)."""
    pixmap = base.pixmap(64, 64) if not base.isNull() else QPixmap(64, 64)
    if base.isNull():
        pixmap.fill(QColor("#5b6b7f"))
    if count <= 0:
        return QIcon(pixmap)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setBrush(QColor("#cf222e"))
    painter.setPen(Qt.PenStyle.NoPen)
    painter.drawEllipse(QRect(26, 0, 38, 38))
    painter.setPen(QColor("#ffffff"))
    font = QFont()
    font.setBold(True)
    font.setPixelSize(22 if count < 100 else 16)
    painter.setFont(font)
    painter.drawText(QRect(26, 0, 38, 38), Qt.AlignmentFlag.AlignCenter, str(count) if count < 1000 else "1k+")
    painter.end()
    return QIcon(pixmap)


def describe(attention: Attention) -> str:
    return (f"{attention.shown(attention.failed_last_hour)} failed in the last hour · "
            f"{attention.shown(attention.waiting_approval)} waiting for approval")


class AttentionPresenter(QObject):
    """Shows notices and counts in the tray, or in the status bar when there is no tray."""

    open_requested = Signal(object)  # the Notice whose job or filter to open
    show_window_requested = Signal()

    def __init__(self, parent: QWidget, status_bar: QStatusBar, settings: NotificationSettings, *,
                 tray_available: bool | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.status_bar = status_bar
        self.has_tray = QSystemTrayIcon.isSystemTrayAvailable() if tray_available is None else tray_available
        self.last_notice: Notice | None = None
        self.attention: Attention | None = None
        self._base_icon = icon("jobdesk")
        self.tray: QSystemTrayIcon | None = None
        # Without a tray, the counts and the latest notice live in the status bar.
        self.counts_label = QLabel("")
        self.notice_label = QLabel("")
        self.notice_label.setTextFormat(Qt.TextFormat.RichText)
        self.notice_label.linkActivated.connect(lambda _link: self._open_last())
        self.notice_label.hide()
        if not self.has_tray:
            status_bar.addPermanentWidget(self.notice_label)
            status_bar.addPermanentWidget(self.counts_label)
        self.menu = QMenu(parent)
        self.mute_menu = self.menu.addMenu("Mute notifications for")
        self.mute_menu.aboutToShow.connect(self._fill_mute_menu)
        self.known_types: set[str] = set()
        self.enabled_action = QAction("Notifications", self.menu)
        self.enabled_action.setCheckable(True)
        self.enabled_action.setChecked(settings.enabled)
        self.enabled_action.setEnabled(settings.env_enabled)  # JOBDESK_NOTIFICATIONS=false wins
        self.enabled_action.toggled.connect(self.set_enabled)
        self.menu.addAction(self.enabled_action)
        self._apply_enabled()

    def set_enabled(self, on: bool) -> None:
        """Notifications, the tray icon and the status-bar fallback, all on or off (remembered)."""
        if self.settings.env_enabled:
            self.settings.set_enabled(on)
        self._apply_enabled()

    def _apply_enabled(self) -> None:
        on = self.settings.enabled
        if on and self.has_tray and self.tray is None:
            self.tray = QSystemTrayIcon(badge_icon(self._base_icon, 0), self)
            show = QAction("Show jobdesk", self.menu)
            show.triggered.connect(self.show_window_requested)
            self.menu.insertAction(self.menu.actions()[0], show)
            self.tray.setContextMenu(self.menu)
            self.tray.messageClicked.connect(self._open_last)
            self.tray.activated.connect(lambda _r: self.show_window_requested.emit())
        if self.tray is not None:
            self.tray.setVisible(on)
        self.counts_label.setVisible(on and not self.has_tray)
        if not on:
            self.notice_label.hide()

    def _fill_mute_menu(self) -> None:
        self.mute_menu.clear()
        muted = self.settings.muted
        types = sorted(self.known_types | muted)
        if not types:
            self.mute_menu.addAction("(no job types yet)").setEnabled(False)
        for type_ in types:
            action = self.mute_menu.addAction(type_)
            action.setCheckable(True)
            action.setChecked(type_ in muted)
            action.toggled.connect(lambda on, t=type_: self.settings.set_muted(t, on))

    # -- what is shown ------------------------------------------------------------------------

    def show_counts(self, attention: Attention) -> None:
        self.attention = attention
        if not self.settings.enabled:
            return
        text = describe(attention)
        if self.tray is not None:
            self.tray.setToolTip(f"jobdesk — {text}")
            self.tray.setIcon(badge_icon(self._base_icon, attention.failed_last_hour + attention.waiting_approval))
        else:
            needs = attention.failed_last_hour + attention.waiting_approval
            self.counts_label.setText(f"⚠ {text}" if needs else text)

    def show_notice(self, notice: Notice) -> None:
        if not self.settings.enabled:
            return
        self.last_notice = notice
        if self.tray is not None and self.tray.supportsMessages():
            kind = QSystemTrayIcon.MessageIcon.Warning if "failed" in notice.statuses \
                else QSystemTrayIcon.MessageIcon.Information
            self.tray.showMessage(notice.title, notice.body, kind, 8000)
            return
        summary = notice.body.replace("\n", "; ")
        self.notice_label.setText(f"{summary} — <a href='open'>show</a>")
        self.notice_label.show()
        self.status_bar.showMessage(f"{notice.title}: {summary}", 10_000)

    def _open_last(self) -> None:
        if self.last_notice is not None:
            self.open_requested.emit(self.last_notice)
            self.notice_label.hide()

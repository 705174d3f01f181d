"""The status bar's word on the read replica (DATABASE_READ_URL): "replica 3.2 s behind" while it
lags the primary by more than a second, nothing otherwise. Without a replica it reads nothing."""

from __future__ import annotations

import logging
from typing import Protocol

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QLabel

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.errors import EXPECTED, reason
from jobdesk.console.tasks import spawn

log = logging.getLogger("jobdesk.console")


class ReplicaLag(Protocol):
    """What the label reads of `jobdesk.service.replica.ReplicaLag` (JobService.replica_lag)."""

    @property
    def where(self) -> str: ...

    @property
    def seconds(self) -> float: ...

    def describe(self) -> str: ...


SHOWN_OVER_S = 1.0  # a replica less behind than this is not mentioned


def describe_lag(lag: ReplicaLag | None) -> str:
    """The label's text: empty unless the replica is more than SHOWN_OVER_S behind."""
    return lag.describe() if lag is not None and lag.seconds > SHOWN_OVER_S else ""


class ReplicaLagLabel(QLabel):
    """Reads the replica's lag every INTERVAL_MS while connected, and shows it when it matters."""

    INTERVAL_MS = 2_000

    def __init__(self, connection: ConsoleConnection) -> None:
        super().__init__("")
        self.connection = connection
        self.lag: ReplicaLag | None = None
        self.setObjectName("replicaLag")
        self.setStyleSheet("QLabel#replicaLag { color: #b45309; font-weight: 600; }")
        self.setVisible(False)
        self._timer = QTimer(self, interval=self.INTERVAL_MS)
        self._timer.timeout.connect(self.refresh)

    def set_active(self, active: bool) -> None:
        if active and self.connection.replica is not None:
            self._timer.start()
            self.refresh()
        else:
            self._timer.stop()
            self.show_lag(None)

    def stop_timers(self) -> None:
        self._timer.stop()

    def refresh(self) -> None:
        spawn(self._load(), "replica-lag")

    async def _load(self) -> None:
        try:
            lag = await self.connection.run(lambda jobs: jobs.replica_lag())
        except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
            log.warning("replica lag failed: %s", reason(exc))
            return
        self.show_lag(lag)

    def show_lag(self, lag: ReplicaLag | None) -> None:
        self.lag = lag
        text = describe_lag(lag)
        self.setText(text)
        self.setToolTip(f"Reads come from the read replica {lag.where} (DATABASE_READ_URL), which has not "
                        "replayed the primary's latest changes; writes and the console's own actions "
                        "go to the primary" if lag is not None else "")
        self.setVisible(bool(text))

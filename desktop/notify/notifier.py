"""Tells the operator when jobs need them: it watches the live changes for jobs that fail for good
or start waiting for approval, and gathers them into one notification per burst window
("5 jobs of pdf.render failed"). Jobs that were already so when the console connected, and muted
types, are left out. The tray presenter (`jobdesk.console.notify.tray`) shows what this decides."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta

from PySide6.QtCore import QObject, QSettings, QTimer, Signal

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.errors import EXPECTED, reason
from jobdesk.console.tasks import spawn
from jobdesk.core.models import short_id
from jobdesk.store.stats import Attention, Transition

log = logging.getLogger("jobdesk.console")

WATCHED = ("failed", "waiting_approval")
BURST_S = 10.0  # at most one notification per this many seconds
GATHER_S = 1.0  # the first one waits this long, so that one batch of failures makes one message
SEEN_MAX = 20_000  # transitions remembered, so a job is not announced twice for one change
COUNTS_EVERY_S = 5.0  # the tray's counts are read at most this often while jobs change
COUNTS_AGE_S = 60.0  # and at least this often
# While jobs change, what became news is read at most this often, whatever the rate of changes:
# the jobs that failed or started waiting since the last read, not each changed job.
READ_EVERY_S = 1.0
# Each read looks this far back before the last one, for a change committed late (its
# updated_at is its transaction's start); what was already announced is remembered, not repeated.
OVERLAP_S = 10.0


@dataclass(frozen=True)
class Notice:
    """One coalesced notification and what clicking it opens."""

    title: str
    body: str
    job_id: str | None  # one job: open it
    statuses: frozenset[str]  # many: filter the job table to these statuses…
    type: str | None  # …and this type, when they share one


def compose(events: list[Transition]) -> Notice:
    """One notification for a burst of transitions."""
    groups: OrderedDict[tuple[str, str], list[Transition]] = OrderedDict()
    for event in events:
        groups.setdefault((event.status, event.type), []).append(event)
    lines = []
    for (status, type_), items in groups.items():
        verb = "failed" if status == "failed" else ("waits" if len(items) == 1 else "wait") + " for approval"
        if len(items) == 1:
            lines.append(f"job {short_id(items[0].id)} of {type_} {verb}")
        else:
            lines.append(f"{len(items)} jobs of {type_} {verb}")
    statuses = frozenset(status for status, _ in groups)
    types = {type_ for _, type_ in groups}
    if len(events) == 1:
        title = "A job failed" if events[0].status == "failed" else "A job waits for approval"
    else:
        title = f"{len(events)} jobs need you"
    return Notice(title, "\n".join(lines), events[0].id if len(events) == 1 else None, statuses,
                  types.pop() if len(types) == 1 else None)


class NotificationSettings:
    """The user's choices, in QSettings: notifications on or off, and the muted job types.
    JOBDESK_NOTIFICATIONS=false turns them off whatever is stored."""

    def __init__(self, store: QSettings | None = None, *, env_enabled: bool = True) -> None:
        self.store = store or QSettings("jobdesk", "jobdesk")
        self.env_enabled = env_enabled

    @property
    def enabled(self) -> bool:
        return self.env_enabled and str(self.store.value("notifications/enabled", "true")).lower() != "false"

    def set_enabled(self, on: bool) -> None:
        self.store.setValue("notifications/enabled", "true" if on else "false")

    @property
    def muted(self) -> set[str]:
        value: object = self.store.value("notifications/muted", [])
        if isinstance(value, str):  # QSettings gives a one-item list back as a plain string
            return {value} if value else set()
        return {str(v) for v in value} if isinstance(value, list) else set()

    def set_muted(self, type_: str, muted: bool) -> None:
        types = self.muted
        if muted:
            types.add(type_)
        else:
            types.discard(type_)
        self.store.setValue("notifications/muted", sorted(types))


class Notifier(QObject):
    """Detects transitions in the live changes and emits coalesced notices and the tray's counts."""

    notice = Signal(object)  # a Notice
    counts = Signal(object)  # an Attention

    def __init__(self, connection: ConsoleConnection, settings: NotificationSettings, *,
                 burst_s: float = BURST_S, gather_s: float = GATHER_S) -> None:
        super().__init__()
        self.connection = connection
        self.settings = settings
        self.burst_s = burst_s
        self.gather_s = gather_s
        self.baseline: datetime | None = None  # the database's clock when the console connected
        self.since: datetime | None = None  # the next read asks for changes after this
        self.reads = 0  # reads of news made, for the curious
        self.pending: list[Transition] = []
        self.known_types: set[str] = set()
        self._seen: OrderedDict[tuple[str, str, int], None] = OrderedDict()
        self._last_shown: float | None = None
        self._timer = QTimer(self, singleShot=True)
        self._timer.timeout.connect(self._flush)
        self._counts_timer = QTimer(self, singleShot=True, interval=int(COUNTS_EVERY_S * 1000))
        self._counts_timer.timeout.connect(lambda: spawn(self.refresh_counts(), "attention-counts"))
        self._read_timer = QTimer(self, singleShot=True, interval=int(READ_EVERY_S * 1000))
        self._read_timer.timeout.connect(lambda: spawn(self._read(), "notifier-read"))
        # "Failed in the last hour" falls as failures age, with no change to announce it.
        self._clock = QTimer(self, interval=int(COUNTS_AGE_S * 1000))
        self._clock.timeout.connect(lambda: spawn(self.refresh_counts(), "attention-counts"))

    def stop_timers(self) -> None:
        self._timer.stop()
        self._counts_timer.stop()
        self._read_timer.stop()
        self._clock.stop()

    # -- input ------------------------------------------------------------------------------

    def on_connected(self) -> None:
        self._clock.start()
        spawn(self._start(), "notifier-start")

    async def _start(self) -> None:
        attention = await self.refresh_counts()
        if attention is not None and self.baseline is None:
            self.baseline = attention.db_now  # what was so before this moment is not news

    async def refresh_counts(self) -> Attention | None:
        try:
            attention = await self.connection.run(lambda jobs: jobs.attention())
        except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
            log.warning("attention counts failed: %s", reason(exc))
            return None
        self.counts.emit(attention)
        return attention

    def on_jobs_changed(self, _ids: set[str] | None) -> None:
        """Jobs changed: read the counts and the news soon, each at most once per its interval."""
        if not self.settings.enabled:
            return
        if not self._counts_timer.isActive():
            self._counts_timer.start()
        if self.baseline is not None and not self._read_timer.isActive():
            self._read_timer.start()

    async def _read(self) -> None:
        """The jobs that failed or started waiting since the last read (with an overlap)."""
        if self.baseline is None:
            return
        since = max(self.baseline, self.since or self.baseline)
        self.reads += 1
        try:
            found = await self.connection.run(lambda jobs: jobs.transitions_since(since))
        except EXPECTED as exc:  # expected failures are messages; bugs reach the error hook
            log.warning("notification check failed: %s", reason(exc))
            return
        if found:
            newest = max(t.updated_at for t in found) - timedelta(seconds=OVERLAP_S)
            self.since = max(since, newest)
        self.add([t for t in found if t.updated_at > self.baseline])

    def add(self, transitions: list[Transition]) -> None:
        """New transitions (already-announced ones and muted types are dropped)."""
        muted = self.settings.muted
        fresh = []
        for t in transitions:
            key = (t.id, t.status, t.attempts)  # one announcement per job, status and attempt
            if key in self._seen or t.status not in WATCHED:
                continue
            self._seen[key] = None
            if len(self._seen) > SEEN_MAX:
                self._seen.popitem(last=False)
            self.known_types.add(t.type)
            if t.type not in muted:
                fresh.append(t)
        if not fresh or not self.settings.enabled:
            return
        self.pending.extend(fresh)
        if not self._timer.isActive():
            now = time.monotonic()
            wait = self.gather_s
            if self._last_shown is not None:
                wait = max(wait, self._last_shown + self.burst_s - now)
            self._timer.start(int(wait * 1000))

    def _flush(self) -> None:
        events, self.pending = self.pending, []
        muted = self.settings.muted  # muted while the burst gathered
        events = [e for e in events if e.type not in muted]
        if not events or not self.settings.enabled:
            return
        self._last_shown = time.monotonic()
        self.notice.emit(compose(events))

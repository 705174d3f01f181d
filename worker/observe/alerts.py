"""Admin alerts through apprise (Telegram, Slack, e-mail, JSON webhooks, ...).

Alerts never slow the worker: `send()` only queues; a background task delivers them in a thread.
The first few alerts of a minute go out at once; past that, they are gathered and sent as one
digest per window, so a burst of failures is one message instead of a flood.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import apprise

log = logging.getLogger("jobdesk.alerts")

BURST = 5  # alerts sent at once within one rolling minute
DIGEST_LIST = 20  # alerts listed in full in a digest; the rest are counted
QUEUE_LIMIT = 10_000


@dataclass(frozen=True)
class Alert:
    title: str
    body: str
    level: str = "failure"  # apprise notify type: info, success, warning, failure


def job_failed(job_id: str, job_type: str, pipeline_id: str | None, user_id: int | None, attempts: int,
               error: str) -> Alert:
    return Alert(f"jobdesk: job {job_type} failed",
                 f"job {job_id}\ntype {job_type}\npipeline {pipeline_id or '-'}\nuser {user_id}\n"
                 f"attempts {attempts}\nlast error: {error}")


def worker_lost(worker_id: str, host: str, pid: int, rescued: Sequence[str]) -> Alert:
    listed = ", ".join(rescued[:20]) + (f" and {len(rescued) - 20} more" if len(rescued) > 20 else "")
    return Alert(f"jobdesk: worker lost on {host}",
                 f"worker {worker_id} (host {host}, pid {pid}) stopped heartbeating and was declared lost.\n"
                 f"jobs taken back: {listed or 'none'}", level="warning")


class AlertSender:
    """Queues alerts and delivers them in the background; a no-op without URLs."""

    def __init__(self, urls: Sequence[str], *, digest_window_s: float = 60.0) -> None:
        self.urls = list(urls)
        self.digest_window_s = digest_window_s
        self._queue: deque[Alert] = deque(maxlen=QUEUE_LIMIT)
        self._sent_at: deque[float] = deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._apprise: apprise.Apprise | None = None
        self.delivered = 0  # messages handed to apprise successfully (for tests and logs)
        self._closing = False

    @property
    def enabled(self) -> bool:
        return bool(self.urls)

    def start(self) -> None:
        if self.enabled and self._task is None:
            self._task = asyncio.create_task(self._run(), name="jobdesk-alerts")

    def send(self, alert: Alert) -> None:
        if not self.enabled:
            return
        self._queue.append(alert)
        self._wake.set()

    async def close(self, timeout: float = 5.0) -> None:
        """Deliver what is queued (waiting at most `timeout`), then stop."""
        if self._task is None:
            return
        self._closing = True
        self._wake.set()
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(self._task)
        except TimeoutError:
            log.warning("%d alert(s) not delivered before shutdown", len(self._queue))
            self._task.cancel()

    async def _run(self) -> None:
        while True:
            if not self._queue:
                if self._closing:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            now = time.monotonic()
            while self._sent_at and now - self._sent_at[0] > 60:
                self._sent_at.popleft()
            if len(self._sent_at) < BURST and len(self._queue) == 1:
                await self._deliver(self._queue.popleft())
                continue
            if len(self._sent_at) < BURST and not self._closing:
                # Several at once: send the first few singly, the rest go to a digest.
                while self._queue and len(self._sent_at) < BURST:
                    await self._deliver(self._queue.popleft())
                continue
            # Over the burst: wait out the digest window (collecting), then send one digest.
            if not self._closing:
                await asyncio.sleep(self.digest_window_s)
            batch = list(self._queue)
            self._queue.clear()
            await self._deliver(self._digest(batch))

    def _digest(self, batch: list[Alert]) -> Alert:
        lines = [f"{len(batch)} alerts in the last {self.digest_window_s:.0f} s:"]
        lines += [f"- {a.title}: {a.body.splitlines()[0]}" for a in batch[:DIGEST_LIST]]
        if len(batch) > DIGEST_LIST:
            lines.append(f"... and {len(batch) - DIGEST_LIST} more")
        return Alert(f"jobdesk: {len(batch)} alerts (digest)", "\n".join(lines))

    async def _deliver(self, alert: Alert) -> None:
        self._sent_at.append(time.monotonic())
        try:
            ok = await asyncio.to_thread(self._notify, alert)
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not stop the worker; logged
            log.warning("alert %r not sent: %s", alert.title, exc)
            return
        if ok:
            self.delivered += 1
        else:
            log.warning("alert %r not sent: no URL in JOB_ALERT_URLS accepted it", alert.title)

    def _notify(self, alert: Alert) -> bool:
        if self._apprise is None:
            import apprise  # slow to import; only workers with alerts configured pay for it

            self._apprise = apprise.Apprise()
            for url in self.urls:
                if not self._apprise.add(url):
                    log.warning("JOB_ALERT_URLS: apprise does not understand %s", url.split("://")[0] + "://…")
        return bool(self._apprise.notify(body=alert.body, title=alert.title, notify_type=alert.level))

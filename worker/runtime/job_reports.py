"""The worker's side of progress and per-job logs: the report of each run, the logging handler
that routes a run's records to it, and the writer that takes what the running jobs reported a
few times a second and writes it in one statement.

A run's job is found through a contextvar set around the processor's call: a task the
processor starts inherits it, and so does a thread started by `asyncio.to_thread` or by
`loop.run_in_executor` with `contextvars.copy_context()`. The job's report is made when it first
reports, so a job that says nothing costs nothing but the contextvar. The handler sits on the root logger
and keeps the records emitted inside a run, of any logger, at JOB_LOG_LEVEL and above; records
outside a run are not its business. Every record, inside a run or not, still reaches the
worker's other handlers (stderr) as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from jobdesk.core.job_report import JobReport, LogLine, Progress
from jobdesk.core.models import Job
from jobdesk.core.trace_ids import current_trace_ids
from jobdesk.store import job_reports

if TYPE_CHECKING:
    from jobdesk.core.settings import Settings
    from jobdesk.runtime.dblink import DbLink

log = logging.getLogger("jobdesk.worker")

Taken = tuple[JobReport, Progress | None, list[LogLine]]  # a report and what was pending in it
FLUSH_INTERVAL_S = 0.5  # at most two writes a second, whatever the number of running jobs

# The job whose run the current code is part of: its records are kept with it.
current_job: contextvars.ContextVar[Job | None] = contextvars.ContextVar("jobdesk_current_job", default=None)


class RunLogHandler(logging.Handler):
    """Keeps, in the current run's report, the records emitted inside a run."""

    def emit(self, record: logging.LogRecord) -> None:
        job = current_job.get()
        if job is None:
            return
        try:
            report = job.current_report()
            if report is None or record.levelno < report.min_level:
                return
            message = record.getMessage()
            if record.exc_info:
                message = f"{message}\n{logging.Formatter().formatException(record.exc_info)}"
            trace_id, span_id = current_trace_ids()
            report.add_line(record.levelname, record.name, message, record.created, trace_id, span_id)
        except Exception:  # noqa: BLE001 - as logging does: a bad record never fails the job
            self.handleError(record)


class AsBefore(logging.Filter):
    """Lets through only the records that were made before the root logger was lowered to
    JOB_LOG_LEVEL: those at the old root level and above, or enabled by a logger's own level."""

    def __init__(self, root_level: int) -> None:
        super().__init__()
        self.root_level = root_level

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= self.root_level:
            return True
        logger: logging.Logger | None = logging.getLogger(record.name)
        root = logging.getLogger()
        while logger is not None and logger is not root:
            if logger.level:
                return record.levelno >= logger.level
            logger = logger.parent
        return False


class _RootSetup:
    """The handler on the root logger, installed once per process however many workers it runs
    (each would keep every record twice otherwise), and what installing it changed."""

    def __init__(self) -> None:
        self.users = 0
        self.handler: RunLogHandler | None = None
        self.root_level = logging.NOTSET
        self.filtered: list[tuple[logging.Handler, AsBefore]] = []  # the root's handlers, kept as they were

    def install(self, wanted: int) -> None:
        root = logging.getLogger()
        self.handler, self.root_level = RunLogHandler(wanted), root.level
        if root.getEffectiveLevel() > wanted:
            as_before = AsBefore(root.getEffectiveLevel())
            for other in root.handlers:
                other.addFilter(as_before)
                self.filtered.append((other, as_before))
            root.setLevel(wanted)
        root.addHandler(self.handler)

    def uninstall(self) -> None:
        root = logging.getLogger()
        if self.handler is not None:
            root.removeHandler(self.handler)
        root.setLevel(self.root_level)
        for other, as_before in self.filtered:
            other.removeFilter(as_before)
        self.handler, self.filtered = None, []


_root = _RootSetup()


@contextlib.contextmanager
def run_logging(level: str) -> Iterator[None]:
    """The handler on the root logger while a worker runs.

    Records below the root's level are never made, so the root is lowered to `level` if needed;
    the handlers it had get a filter (`AsBefore`) that keeps out what the lowering let in, so
    stderr, and any handler of the application's, show what they showed before."""
    if _root.users == 0:
        _root.install(logging.getLevelName(level))
    _root.users += 1
    try:
        yield
    finally:
        _root.users -= 1
        if _root.users == 0:
            _root.uninstall()


class Reports:
    """The reports of the runs under way, and the loop that writes them."""

    def __init__(self, db: DbLink, settings: Settings) -> None:
        self.db = db
        self.max_lines = settings.JOB_LOG_MAX_LINES
        self.max_bytes = settings.JOB_LOG_MAX_BYTES
        self.min_level = logging.getLevelName(settings.JOB_LOG_LEVEL)
        self.open: dict[tuple[str, int], JobReport] = {}
        self.writes = 0  # statements written, for the benchmarks
        self._wanted = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = asyncio.Lock()  # one write at a time: a later progress never goes out first
        self._making = threading.Lock()  # a report is made once, whichever thread asks first

    def start(self, job: Job) -> None:
        """A run of `job` starts now: its report is made when it first reports (`report_of`)."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        job.report = None
        job.report_source = self.report_of

    def report_of(self, job: Job) -> JobReport | None:
        """The report of the job's current run, made now if it has none; None once the run has
        ended (a thread the run left behind reports into nothing). From any thread."""
        with self._making:
            if job.report is None and job.report_source is not None:
                job.report = JobReport(job.id, job.attempt, max_lines=self.max_lines, max_bytes=self.max_bytes,
                                       min_level=self.min_level, wake=self._wake)
                self.open[(job.id, job.attempt)] = job.report
            return job.report

    def _wake(self) -> None:
        """From any thread: a report has something to write."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self._wanted.set)
        except RuntimeError:  # the loop closed meanwhile: the worker is gone
            pass

    def end(self, job: Job) -> Taken | None:
        """The run has ended: nothing more is kept. What is left to write of its report, if
        anything (a job that reported nothing costs a lock here, and no write)."""
        with self._making:
            report, job.report_source = job.report, None
            if report is None:
                return None
            self.open.pop((report.job_id, report.attempt), None)
        progress, lines = report.close()
        return (report, progress, lines) if progress is not None or lines else None

    async def finish(self, job: Job) -> None:
        """`end` the run and write what was left (before its outcome is written)."""
        taken = self.end(job)
        if taken is not None:
            await self.write_last(taken)

    async def write_last(self, taken: Taken) -> None:
        await self._write([taken])

    async def run(self) -> None:
        """Write what the running jobs reported, at most once per FLUSH_INTERVAL_S."""
        while True:
            await self._wanted.wait()
            await asyncio.sleep(FLUSH_INTERVAL_S)  # what comes meanwhile goes out in the same write
            self._wanted.clear()
            with self._making:  # threads add reports
                reports = [report for report in self.open.values() if report.pending]
            taken = [(report, *report.take()) for report in reports]
            taken = [(r, p, lines) for r, p, lines in taken if p is not None or lines]
            if taken:
                await self._write(taken)

    async def _write(self, taken: list[Taken]) -> None:
        progress = [(r.job_id, p) for r, p, _ in taken if p is not None]
        lines = [(r.job_id, r.attempt, line) for r, _, batch in taken for line in batch]
        async with self._lock:
            try:
                await self.db.call(lambda c: job_reports.write(c, progress, lines))
                self.writes += 1
            except Exception as exc:  # noqa: BLE001 - progress and logs never fail a job or the worker
                log.warning("could not write the progress and log lines of %d job(s): %s", len(taken), exc)

"""Workers this console starts as child processes: `jobdesk worker` in a QProcess, its log, stop
and restart. `WorkerLauncher` keeps every worker one console window started.

A launched worker works on the console's database. On the embedded default it is given no
DATABASE_URL, so it finds the same embedded server the way the console did; otherwise it gets the
console's URL.
"""

from __future__ import annotations

import asyncio
import codecs
import logging
import os
from collections import deque
from collections.abc import Mapping

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, Signal

from jobdesk.console.connection import ConsoleConnection
from jobdesk.console.workers.worker_log import LineSplitter, LogLine
from jobdesk.runtime.launch import worker_command

log = logging.getLogger("jobdesk.console")

MAX_LINES = 5000  # log lines kept per launched worker
STOP_GRACE_S = 5.0  # beyond JOB_SHUTDOWN_TIMEOUT, before a stopping worker is killed


def worker_environment(dsn: str, *, embedded_default: bool, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a launched worker: ours, pointed at the console's database."""
    env = dict(os.environ if base is None else base)
    if embedded_default:
        env.pop("DATABASE_URL", None)
    else:
        env["DATABASE_URL"] = dsn
    env["PYTHONUNBUFFERED"] = "1"  # lines reach the log dock as they are written
    return env


class LaunchedWorker(QObject):
    """One `jobdesk worker` child process, restartable, with the last MAX_LINES lines of its log."""

    output = Signal(list)  # LogLines just read
    state_changed = Signal()  # started, stopping, exited
    failed = Signal(str)  # it exited without being asked to, or could not start: why

    def __init__(self, number: int, argv: list[str], env: dict[str, str], *, stop_timeout_s: float,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.number = number
        self.argv = argv
        self.env = env
        self.stop_timeout_s = stop_timeout_s
        self.lines: deque[LogLine] = deque(maxlen=MAX_LINES)
        self.process: QProcess | None = None
        self.pid: int | None = None
        self.stopping = False
        self.left_running = False
        self.exit_note = ""
        self._splitter = LineSplitter()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._exited = asyncio.Event()
        self._exited.set()

    # -- state ------------------------------------------------------------------------------

    @property
    def is_running(self) -> bool:
        return self.process is not None and self.process.state() != QProcess.ProcessState.NotRunning

    def status(self) -> str:
        if self.left_running:
            return f"left running (pid {self.pid})"
        if self.process is None:
            return "not started"
        if self.stopping and self.is_running:
            return f"stopping (pid {self.pid})…"
        state = self.process.state()
        if state == QProcess.ProcessState.Starting:
            return "starting…"
        if state == QProcess.ProcessState.Running:
            return f"running (pid {self.pid})"
        return self.exit_note or "exited"

    def label(self) -> str:
        return f"Worker {self.number} — {self.status()}"

    # -- control ----------------------------------------------------------------------------

    def start(self) -> None:
        if self.is_running:
            return
        process = QProcess(self)
        process.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
        environment = QProcessEnvironment()
        for key, value in self.env.items():
            environment.insert(key, value)
        process.setProcessEnvironment(environment)
        process.readyReadStandardOutput.connect(self._read)
        process.started.connect(self._started)
        process.finished.connect(self._finished)
        process.errorOccurred.connect(self._error)
        old, self.process = self.process, process
        if old is not None:
            old.deleteLater()
        self.stopping = False
        self.exit_note = ""
        self.pid = None
        self._exited.clear()
        self._note(f"starting: {' '.join(self.argv)}")
        process.start(self.argv[0], self.argv[1:])
        self.state_changed.emit()

    async def stop(self) -> None:
        """Ask the worker to stop (SIGTERM: running jobs get JOB_SHUTDOWN_TIMEOUT seconds), and
        kill it if it is still there a little after that."""
        if not self.is_running or self.process is None:
            return
        self.stopping = True
        self.state_changed.emit()
        self._note("stopping: running jobs may finish first")
        self.process.terminate()
        try:
            async with asyncio.timeout(self.stop_timeout_s + STOP_GRACE_S):
                await self._exited.wait()
        except TimeoutError:
            self._note(f"still running after {self.stop_timeout_s + STOP_GRACE_S:.0f} s: killing it")
            self.kill()
            await self._exited.wait()

    async def restart(self) -> None:
        await self.stop()
        self.start()

    def kill(self) -> None:
        """Kill at once (the worker gets no chance to put its jobs back)."""
        if self.process is not None and self.is_running:
            self.process.kill()
            self.process.waitForFinished(3000)

    def leave_running(self) -> None:
        """Let the process outlive the console: forget it instead of killing it on exit.

        A QProcess kills its child when destroyed unless it believes the child has already gone.
        Destroying it closes the log pipe, so the worker never blocks on a pipe nobody reads.
        """
        process = self.process
        if process is None or not self.is_running:
            return
        for signal in (process.readyReadStandardOutput, process.started, process.finished, process.errorOccurred):
            signal.disconnect()
        process.setProcessState(QProcess.ProcessState.NotRunning)
        process.deleteLater()
        self.process = None
        self.left_running = True
        self._note(f"left running without the console (pid {self.pid}); its log is no longer shown here")
        self._exited.set()
        self.state_changed.emit()

    # -- process events ---------------------------------------------------------------------

    def _read(self) -> None:
        if self.process is None:
            return
        self.receive(self._decoder.decode(bytes(self.process.readAllStandardOutput().data())))

    def receive(self, chunk: str) -> None:
        """Take output of the process: complete lines go to the log, a partial one waits."""
        self._add(self._splitter.feed(chunk))

    def _started(self) -> None:
        if self.process is not None:
            self.pid = self.process.processId()
        self.state_changed.emit()

    def _finished(self, code: int, status: QProcess.ExitStatus) -> None:
        self._read()
        self._add(self._splitter.flush())
        asked = self.stopping
        if status == QProcess.ExitStatus.CrashExit:
            self.exit_note = "killed" if asked else "crashed or was killed"
        else:
            self.exit_note = f"exited (code {code})"
        self._note(self.exit_note)
        self.stopping = False
        self._exited.set()
        self.state_changed.emit()
        if not asked and (status == QProcess.ExitStatus.CrashExit or code != 0):
            self.failed.emit(self.exit_note)

    def _error(self, error: QProcess.ProcessError) -> None:
        if error != QProcess.ProcessError.FailedToStart or self.process is None:
            return
        self.exit_note = f"could not start: {self.process.errorString()}"
        self._note(self.exit_note)
        self._exited.set()
        self.state_changed.emit()
        self.failed.emit(self.exit_note)

    def _note(self, text: str) -> None:
        self._add([LogLine(logging.WARNING if "kill" in text or "could not" in text else logging.INFO,
                           f"── {text}")])

    def _add(self, lines: list[LogLine]) -> None:
        if lines:
            self.lines.extend(lines)
            self.output.emit(lines)


class WorkerLauncher(QObject):
    """The workers one console window started, against its connection's database."""

    added = Signal(object)  # a new LaunchedWorker
    changed = Signal()  # one of them started, stopped or exited

    def __init__(self, connection: ConsoleConnection, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.connection = connection
        self.workers: list[LaunchedWorker] = []

    def launch(self, *args: str) -> LaunchedWorker:
        """Start `jobdesk worker ARGS` on the console's database."""
        connection = self.connection
        embedded_default = connection.embedded and not connection.settings.DATABASE_URL
        env = worker_environment(connection.dsn, embedded_default=embedded_default)
        worker = LaunchedWorker(len(self.workers) + 1, worker_command(*args), env,
                                stop_timeout_s=connection.settings.JOB_SHUTDOWN_TIMEOUT, parent=self)
        worker.state_changed.connect(self.changed)
        self.workers.append(worker)
        self.added.emit(worker)
        worker.start()
        log.info("launched worker %d: %s", worker.number, " ".join(worker.argv))
        return worker

    def running(self) -> list[LaunchedWorker]:
        return [w for w in self.workers if w.is_running]

    def pids(self) -> set[int]:
        return {w.pid for w in self.running() if w.pid is not None}

    async def stop_all(self) -> None:
        await asyncio.gather(*(w.stop() for w in self.running()))

    def leave_running(self) -> None:
        for worker in self.running():
            worker.leave_running()

    def kill_all(self) -> None:
        for worker in self.running():
            worker.kill()

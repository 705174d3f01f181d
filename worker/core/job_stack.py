"""A running job's stack, as an operator asks for it: the frames its code is in now, outermost
first and innermost last, as a traceback prints them; when it was taken, for which attempt, on
which worker; and whether the job still runs or has ended since (the last stack taken is kept)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from jobdesk.core.json_value import JsonObject

ANSWER_WITHIN_S = 5.0  # how long an asker waits for the worker's answer


@dataclass(frozen=True)
class StackFrame:
    """One frame: the file, the line it is at, the function, and that line's source."""

    file: str
    line: int
    function: str
    source: str

    def to_json(self) -> JsonObject:
        return {"file": self.file, "line": self.line, "function": self.function, "source": self.source}

    @classmethod
    def from_json(cls, value: JsonObject) -> StackFrame:
        line = value.get("line")
        return cls(str(value.get("file", "")), line if isinstance(line, int) else 0,
                   str(value.get("function", "")), str(value.get("source", "")))

    def text(self) -> str:
        """Two lines, as a traceback prints a frame (the second only when the source is known)."""
        head = f'  File "{self.file}", line {self.line}, in {self.function}'
        return f"{head}\n    {self.source}" if self.source else head


@dataclass(frozen=True)
class JobStack:
    """A job's last stack. `running`: the job still runs the attempt it was taken in (taken just
    now, when asked); else the job has ended since (its `status`)."""

    job_id: str
    attempt: int
    worker_id: str
    taken_at: datetime
    frames: list[StackFrame]
    running: bool
    status: str

    def headline(self) -> str:
        """The one line above the frames."""
        when = f"{self.taken_at.astimezone():%Y-%m-%d %H:%M:%S %Z}".strip()
        if self.running:
            return (f"Stack of job {self.job_id}, attempt {self.attempt} on worker {self.worker_id}, "
                    f"taken {when} (most recent call last):")
        return (f"Stack of job {self.job_id}, attempt {self.attempt} on worker {self.worker_id}, taken {when}; "
                f"the job has ended since ({self.status}):")

    def text(self) -> str:
        """The headline and the frames, as a traceback prints them."""
        body = "\n".join(f.text() for f in self.frames) if self.frames else "  (no frames: the job had not started)"
        return f"{self.headline()}\n{body}"

    def to_json(self) -> JsonObject:
        return {"job_id": self.job_id, "attempt": self.attempt, "worker_id": self.worker_id,
                "taken_at": self.taken_at.isoformat(), "running": self.running, "status": self.status,
                "frames": [f.to_json() for f in self.frames]}

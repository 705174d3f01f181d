"""A large batch of new jobs written by COPY, PostgreSQL's bulk load, instead of one INSERT.

The rows are the ones the INSERTs of `inserts` write, column for column, in the same order: the
ids come from the client, the columns left out take the table's defaults, and COPY fires the same
insert triggers as INSERT (the owner check, the start time, the dependency count and edges, and
the statement trigger that notifies workers with the ids inserted). Every job has passed
`check_new_job` and its JSON has been encoded before the first row is sent. A refusal by the
server (a taken id, an unknown user) fails the COPY whole, as it fails the INSERT whole.

What COPY cannot do is skip a row, as `ON CONFLICT DO NOTHING` skips a job whose unique key an
unfinished job holds. Jobs with keys come here only after the look-up of the keys' holders, in a
savepoint: a key taken since by a concurrent enqueue fails the COPY on `jobs_unique_key_idx`,
which `inserts` takes for the lost race it is, and the enqueue starts again from the look-up (as
it does when the INSERT skips a row).

The rows travel in COPY's text format, which the client builds as one string, with no codec of
the connection involved (an application's connection, or the pool's, may have its own for
jsonb); the server reads jsonb from text in either format. A small batch goes by the INSERT,
which answers in one round trip where COPY takes two.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from itertools import chain
from typing import Protocol

from jobdesk.core.models import JobCreate
from jobdesk.core.validation import json_text

# The smallest batch that goes by COPY. COPY saves about 4 us of CPU a job over the INSERT
# (benchmarks/enqueue_bench.py --cpu) but waits for one more round trip: from 200 jobs on, it
# saves more than a round trip of 1 ms, a database across a network. Below, a batch's time is
# mostly its commit either way (benchmarks/enqueue_bench.py --sizes).
COPY_MIN_JOBS = 200

_PLAIN = ("id", "type", "user_id", "pipeline_id", "input_data", "dependent_on_jobs", "priority")
# When some job has a start time, a trace context or a unique key.
_FULL = (*_PLAIN, "scheduled_at", "trace_context", "unique_key")

_NULL = "\\N"  # the text format's NULL
_JSON_ESCAPED = re.compile(r'["\\\x00-\x1f]')  # what JSON writes escaped inside a string
# What the text format reads specially inside a value, as it must be written there.
_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


class CopyConnection(Protocol):
    """What COPY needs of a connection: asyncpg's `copy_to_table` (asyncpg's own, the pool's, and
    `jobdesk.store.foreign`'s for an application's connection)."""

    async def copy_to_table(self, table_name: str, *, source: memoryview, columns: Sequence[str],
                            format: str) -> str: ...


def copies(conn: object, ordered: Sequence[JobCreate]) -> bool:
    """Whether this batch goes by COPY: large enough, on a connection that can (asyncpg's,
    psycopg's, and theirs under SQLAlchemy or Django)."""
    return len(ordered) >= COPY_MIN_JOBS and hasattr(conn, "copy_to_table")


def _values(job: JobCreate, default_user: int, full: bool) -> list[str | None]:
    """A job's values in column order, None for NULL."""
    values = [job.id, job.type, str(default_user if job.user_id is None else job.user_id), job.pipeline_id,
              json_text(job.input_data, "input_data", job_id=job.id, field="input_data"),
              json_text(job.dependent_on_jobs), str(job.priority)]
    if full:
        values += [None if job.scheduled_at is None else job.scheduled_at.isoformat(),
                   None if job.trace_context is None else json_text(job.trace_context), job.unique_key]
    return values


def _escaped(ordered: Sequence[JobCreate], default_user: int, full: bool) -> str:
    """The text of `copy_text` with every value escaped (only a batch with a tab, a line break or
    a backslash inside some value comes here)."""
    return "".join("\t".join(_NULL if value is None else value.translate(_ESCAPES)
                             for value in _values(job, default_user, full)) + "\n" for job in ordered)


def _lines(ordered: Sequence[JobCreate], default_user: int, full: bool) -> list[str]:
    # One f-string per job: three times faster than joining `_values`, for the bulk case; an
    # empty input or dependency list (checked a dict and a list) is written without a call.
    deps = _dependencies_json(ordered)
    lines = [
        f"{j.id}\t{j.type}\t{default_user if j.user_id is None else j.user_id}\t"
        f"{_NULL if j.pipeline_id is None else j.pipeline_id}\t"
        f"{json_text(j.input_data, 'input_data', job_id=j.id, field='input_data') if j.input_data else '{}'}\t"
        f"{deps(j.dependent_on_jobs) if j.dependent_on_jobs else '[]'}\t{j.priority}" for j in ordered]
    if full:
        lines = [f"{line}\t{_NULL if j.scheduled_at is None else j.scheduled_at.isoformat()}\t"
                 f"{_NULL if j.trace_context is None else json_text(j.trace_context)}\t"
                 f"{_NULL if j.unique_key is None else j.unique_key}" for line, j in zip(lines, ordered, strict=True)]
    return lines


def _dependencies_json(ordered: Sequence[JobCreate]) -> Callable[[list[str]], str]:
    """How to write the jobs' dependency lists as JSON: as the join of their ids when no id of
    the batch holds a character JSON escapes (a quote, a backslash, a control character), a
    tenth of the json module's time; else by the json module."""
    dependencies = [j.dependent_on_jobs for j in ordered if j.dependent_on_jobs]
    if not dependencies or _JSON_ESCAPED.search("".join(chain.from_iterable(dependencies))):
        return json_text
    return lambda ids: '["' + '", "'.join(ids) + '"]'


def copy_text(ordered: Sequence[JobCreate], default_user: int, full: bool) -> str:
    """The text COPY reads for these jobs (columns `_FULL` if `full`, else `_PLAIN`), a line
    per job; a job without a user gets `default_user`.

    Values are written as they are, then the whole is checked once: as many tabs and line
    breaks as the separators, no carriage return, and no backslash but those of the NULLs mean
    that no value needed escaping (nearly every batch: ids, type names and compact JSON)."""
    text = "\n".join(_lines(ordered, default_user, full)) + "\n"
    nulls = sum(j.pipeline_id is None for j in ordered)
    if full:
        nulls += sum((j.scheduled_at is None) + (j.trace_context is None) + (j.unique_key is None) for j in ordered)
    columns = len(_FULL if full else _PLAIN)
    if (text.count("\\") == nulls and text.count("\t") == len(ordered) * (columns - 1)
            and text.count("\n") == len(ordered) and "\r" not in text):
        return text
    return _escaped(ordered, default_user, full)


async def copy_jobs(conn: CopyConnection, ordered: Sequence[JobCreate], default_user: int, *, full: bool) -> None:
    """COPY checked jobs, parents first, into `jobs`; a job without a user gets `default_user`;
    `full`: some job has a start time, a trace context or a unique key (the INSERT's choice too).
    The server's errors are asyncpg's, as the INSERT's are (the caller turns them into InvalidJob,
    or a lost race for a unique key)."""
    # A memoryview: asyncpg would take bytes for a file's path.
    data = memoryview(copy_text(ordered, default_user, full).encode())
    await conn.copy_to_table("jobs_live", source=data, columns=_FULL if full else _PLAIN, format="text")

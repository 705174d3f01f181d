"""Read-side queries for browsing jobs: filters, server-side sorting, keyset pages, capped counts.

The console and the CLI read through these; they never count or scan more than a screen needs,
so they stay fast on a table of millions of jobs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

import asyncpg

from jobdesk.core.fingerprint import MAX_LENGTH, NO_ERROR
from jobdesk.core.models import JobRecord, Status

# Columns of a job list row: what a table shows, without the large JSON documents.
ROW_COLUMNS = ("id, type, status, user_id, pipeline_id, retry_count, attempts, is_active, created_at, "
               "updated_at, started_at, completed_at, next_retry_at, scheduled_at, seq, "
               "split_part(error_message, E'\\n', 1) AS error_line, run_at")

# Sort keys the server can order by; `seq` breaks ties, so every key is unique and pages are stable.
SORT_KEYS: dict[str, str] = {
    "created": "seq",
    "updated": "updated_at",
    "type": "type",
    "status": "status",
    "user": "user_id",
    "pipeline": "pipeline_id",
    "attempts": "retry_count",
}

COUNT_CAP = 10_000
MAX_YEAR = 9999  # timestamptz 'infinity' reads back as datetime.max: a suspension with no timeout


def raw_error_key(table: str = "") -> str:
    """The group key of an error written before fingerprints were stored: its first line as it
    is, cut as fingerprints are (`worker.fingerprint.MAX_LENGTH`)."""
    return f"left(split_part({table}error_message, E'\\n', 1), {MAX_LENGTH})"


Scalar = str | int | float | bool | None


@dataclass(frozen=True)
class InputTerm:
    """An `input.PATH:VALUE` search term: the input holds exactly `value` at `path` (object keys
    from the input's root); `value` is a JSON scalar, typed (42 is not "42")."""

    path: tuple[str, ...]
    value: Scalar

    def document(self) -> str:
        """The containment document, `{"user": {"plan": "business"}}`, as JSON text for `@>`."""
        doc: object = self.value
        for key in reversed(self.path):
            doc = {key: doc}
        return json.dumps(doc, ensure_ascii=False)

    def describe(self) -> str:
        return f"input.{'.'.join(self.path)} = {json.dumps(self.value, ensure_ascii=False)}"


@dataclass(frozen=True)
class JobFilter:
    """What the user narrowed the list to. Empty fields do not filter."""

    statuses: frozenset[Status] = frozenset()
    type: str | None = None
    type_pattern: str | None = None  # a glob where `*` matches anything (`video.*`); nothing else is special
    pipeline_id: str | None = None
    user_id: int | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None
    search: str | None = None  # substring of id, type, error or input
    error: str | None = None  # substring of the error message, case-insensitive
    fingerprint: str | None = None  # jobs whose error has this fingerprint (a Failures group)
    input_terms: tuple[InputTerm, ...] = ()  # exact values at paths of the input, all of them

    def where(self, params: list[object], *, skip_status: bool = False) -> str:
        """A WHERE clause for this filter; values are appended to `params` as $n placeholders."""
        clauses: list[str] = []

        def bind(value: object) -> str:
            params.append(value)
            return f"${len(params)}"

        if self.statuses and not skip_status:
            # Literals, one equality each: the indexes of jobs by status are partial (sql/026 leaves
            # running jobs out of jobs_status_idx), so each status is served by the index that
            # holds it, combined (BitmapOr); `status = ANY($n)` could be served by neither.
            clauses.append("(" + " OR ".join(f"status = {status_literal(Status(s))}"
                                             for s in sorted(self.statuses)) + ")")
        if self.type:
            clauses.append(f"type = {bind(self.type)}")
        if self.type_pattern:
            clauses.append(f"type LIKE {bind(glob_to_like(self.type_pattern))}")
        if self.pipeline_id:
            clauses.append(f"pipeline_id = {bind(self.pipeline_id)}")
        if self.user_id is not None:
            clauses.append(f"user_id = {bind(self.user_id)}")
        if self.created_from:
            clauses.append(f"created_at >= {bind(self.created_from)}")
        if self.created_to:
            clauses.append(f"created_at < {bind(self.created_to)}")
        if self.search and self.search.strip():
            pattern = bind("%" + escape_like(self.search.strip()) + "%")
            clauses.append(f"(id ILIKE {pattern} OR type ILIKE {pattern} OR error_message ILIKE {pattern} "
                           f"OR input_data::text ILIKE {pattern})")
        if self.error and self.error.strip():
            clauses.append(f"error_message ILIKE {bind('%' + escape_like(self.error.strip()) + '%')}")
        for term in self.input_terms:
            # Containment, not `input_data #> path = value`: the GIN index (sql/030) serves `@>`.
            # It holds only the non-empty inputs (sql/040), which are all a term can match: the
            # index's condition, said again, lets the planner use it.
            clauses.append(f"input_data @> {bind(term.document())}::text::jsonb AND input_data <> '{{}}'::jsonb")
        if self.fingerprint:
            key = bind(self.fingerprint)
            # Failed jobs without any error message group as NO_ERROR.
            no_error = (" OR (error_fingerprint IS NULL AND error_message IS NULL AND status = 'failed')"
                        if self.fingerprint == NO_ERROR else "")
            clauses.append(f"(error_fingerprint = {key} OR (error_fingerprint IS NULL AND error_message IS NOT NULL "
                           f"AND {raw_error_key()} = {key}){no_error})")
        return " AND ".join(clauses) or "true"

    def describe(self) -> str:
        """The filter in words, for confirmations and the audit log: "status failed, type pdf".

        It walks the dataclass's fields, so that no field is left out of the words: a field
        without a wording in `_FILTER_WORDS` is named by its name (and tests/store fail)."""
        parts: list[str] = []
        for spec in fields(self):
            value = getattr(self, spec.name)
            if value is None or value == () or value == frozenset() or (isinstance(value, str) and not value.strip()):
                continue
            words = _FILTER_WORDS.get(spec.name)
            parts.extend(words(value) if words is not None else [f"{spec.name} {value}"])
        return ", ".join(parts) or "all jobs"


def _when(value: datetime) -> str:
    return f"{value:%Y-%m-%d %H:%M} UTC"


# How each field of JobFilter is said, in the order of the fields; each gives its phrases.
_FILTER_WORDS: dict[str, Callable[[Any], list[str]]] = {
    "statuses": lambda v: ["status " + " or ".join(str(s) for s in sorted(v))],
    "type": lambda v: [f"type {v}"],
    "type_pattern": lambda v: [f"type {v}"],  # the glob shows itself: type video.*
    "pipeline_id": lambda v: [f"pipeline {v}"],
    "user_id": lambda v: [f"user {v}"],
    "created_from": lambda v: [f"created since {_when(v)}"],
    "created_to": lambda v: [f"created before {_when(v)}"],
    "search": lambda v: [f"text “{v.strip()}”"],
    "error": lambda v: [f"error containing “{v.strip()}”"],
    "fingerprint": lambda v: [f"error “{v}”"],
    "input_terms": lambda v: [term.describe() for term in v],
}


def escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def glob_to_like(pattern: str) -> str:
    """A `*` glob as a LIKE pattern: `*` becomes `%`, and LIKE's own wildcards are escaped."""
    return "%".join(escape_like(part) for part in pattern.split("*"))


def glob_matches(pattern: str, text: str) -> bool:
    """Whether `text` matches the `*` glob, as `glob_to_like` does on the server."""
    return re.fullmatch(".*".join(re.escape(part) for part in pattern.split("*")), text, re.DOTALL) is not None


@dataclass
class JobRow:
    """One line of a job list."""

    id: str
    type: str
    status: Status
    user_id: int | None
    pipeline_id: str | None
    retry_count: int
    attempts: int
    is_active: bool
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    next_retry_at: datetime | None
    scheduled_at: datetime | None
    seq: int
    error_line: str | None
    run_at: datetime | None = None  # a queued job's wake time: delayed, retrying, or suspended ('infinity')

    @property
    def suspended(self) -> bool:
        """Queued with a wake time that no schedule or retry explains: a durable sleep or wait
        (the waiting reason says which)."""
        if self.status != Status.QUEUED or self.run_at is None:
            return False
        later = [t for t in (self.scheduled_at, self.next_retry_at) if t is not None]
        return self.run_at.year >= MAX_YEAR or not later or max(later) < self.run_at

    @classmethod
    def from_record(cls, record: asyncpg.Record) -> JobRow:
        values = dict(record)
        values["status"] = Status(values["status"])
        return cls(**values)

    def keyset(self, sort: str) -> tuple[Any, int]:
        """This row's position in `sort` order, to fetch the page after it."""
        return getattr(self, SORT_KEYS[sort]), self.seq


@dataclass(frozen=True)
class Page:
    rows: list[JobRow]
    has_more: bool


@dataclass(frozen=True)
class StatusCounts:
    """Per-status counts; a count at the cap is shown as "N+" (`exact` is False)."""

    counts: dict[Status, int] = field(default_factory=dict)
    cap: int = COUNT_CAP

    def exact(self, status: Status) -> bool:
        return self.counts.get(status, 0) < self.cap

    def total(self) -> tuple[int, bool]:
        """The jobs of every status, and whether that is exact (no status reached the cap)."""
        return sum(self.counts.values()), all(self.exact(s) for s in self.counts)


async def fetch_page(conn: asyncpg.Connection, filt: JobFilter, *, sort: str = "created", descending: bool = True,
                     after: tuple[Any, int] | None = None, limit: int = 200) -> Page:
    """One page of jobs in the requested order, after the keyset `after` = (sort value, seq)."""
    if sort not in SORT_KEYS:
        raise ValueError(f"cannot sort by {sort!r}")
    column = SORT_KEYS[sort]
    params: list[object] = []
    if column == "seq":
        sql = in_enqueue_order(ROW_COLUMNS, filt, params, descending=descending,
                               after_seq=after[1] if after is not None else None, limit=limit + 1)
        rows = await conn.fetch(sql, *params)
        return Page([JobRow.from_record(r) for r in rows[:limit]], has_more=len(rows) > limit)
    where = filt.where(params)
    direction = "DESC" if descending else "ASC"
    nulls = "NULLS LAST" if descending else "NULLS FIRST"
    if after is not None:
        value, seq = after
        cmp = "<" if descending else ">"
        if value is None:
            # NULL keys count as the smallest: last when descending, first when ascending.
            not_null_side = "" if descending else f" OR {column} IS NOT NULL"
            where += f" AND (({column} IS NULL AND seq {cmp} ${len(params) + 1}){not_null_side})"
            params.append(seq)
        else:
            v, s = len(params) + 1, len(params) + 2
            params += [value, seq]
            null_side = f" OR {column} IS NULL" if descending else ""
            where += f" AND (({column}, seq) {cmp} (${v}, ${s}){null_side})"
    order = f"{column} {direction} {nulls}, seq {direction}"
    params.append(limit + 1)
    rows = await conn.fetch(f"SELECT {ROW_COLUMNS} FROM jobs WHERE {where} ORDER BY {order} LIMIT ${len(params)}",
                            *params)
    return Page([JobRow.from_record(r) for r in rows[:limit]], has_more=len(rows) > limit)


def in_enqueue_order(columns: str, filt: JobFilter, params: list[object], *, descending: bool,
                     after_seq: int | None, limit: int) -> str:
    """A SELECT of `columns` (`seq` among them) of the first `limit` jobs matching `filt` in
    enqueue order, newest first when `descending`, after `after_seq`; values go to `params`.

    `jobs` has no index on `seq` alone (one more for every enqueue to write), so ORDER BY seq over the
    table read every row and sorted: 400 ms a page at 1,000,000 jobs. The status index holds each
    status's jobs in seq order, so the page is one walk of it per status, each stopping after
    `limit` rows, merged. Running jobs are the exception (sql/026: a claim does not write that
    index): they are read from jobs_in_progress_worker_idx and sorted, as many as the workers
    have slots. The statuses are written into the statement, not bound, so that a plan
    kept for later calls still knows which status is common and which is rare, and each walk
    is planned for its own (a read of the table where a filter is rare within a common status)."""
    where = filt.where(params, skip_status=True)
    direction = "DESC" if descending else "ASC"
    if after_seq is not None:
        params.append(after_seq)
        where += f" AND seq {'<' if descending else '>'} ${len(params)}"
    params.append(limit)
    walks = " UNION ALL ".join(
        f"(SELECT {columns} FROM jobs WHERE status = {status_literal(status)} AND {where} "
        f"ORDER BY seq {direction} LIMIT ${len(params)})" for status in _statuses(filt.statuses))
    return f"SELECT * FROM ({walks}) AS walked ORDER BY seq {direction} LIMIT ${len(params)}"


def _statuses(chosen: Collection[Status | str]) -> list[Status]:
    """The statuses chosen, or every status when none is; each one checked to be a status."""
    return sorted(Status(s) for s in chosen) if chosen else list(Status)


def status_literal(status: Status) -> str:
    """A status as an SQL literal: it is one of `Status`'s values, which need no escaping."""
    return f"'{status.value}'"


def per_status_counts(statuses: Sequence[str]) -> str:
    """A SELECT of (status, n): the jobs in each of these statuses, one count per status, written
    into the statement so that each is read from the index that holds that status (jobs_status_idx
    leaves running jobs out: `status = ANY($1)` could be served by neither index)."""
    return " UNION ALL ".join(f"SELECT {status_literal(Status(s))}::text AS status, count(*) AS n FROM jobs "
                              f"WHERE status = {status_literal(Status(s))}" for s in statuses)


async def fetch_records(conn: asyncpg.Connection, job_ids: Sequence[str]) -> dict[str, JobRecord]:
    """The full records of these jobs, by id; missing ids are left out."""
    rows = await conn.fetch(f"SELECT {JobRecord.COLUMNS} FROM jobs WHERE id = ANY($1::text[])", list(job_ids))
    return {r["id"]: JobRecord.from_row(r) for r in rows}


async def fetch_rows(conn: asyncpg.Connection, job_ids: Sequence[str]) -> list[JobRow]:
    """The current list rows of these jobs (for live updates); missing ids were deleted."""
    rows = await conn.fetch(f"SELECT {ROW_COLUMNS} FROM jobs WHERE id = ANY($1::text[])", list(job_ids))
    return [JobRow.from_record(r) for r in rows]


async def status_counts(conn: asyncpg.Connection, filt: JobFilter, *, cap: int = COUNT_CAP,
                        only: Sequence[Status] | None = None) -> StatusCounts:
    """How many jobs of each status (or of the statuses `only`) match the filter (ignoring its
    own status choice), capped.
    One count per status, the status written into the statement (see `in_enqueue_order`): bound
    from a list, each was planned for an unknown status, and a rare status read the whole table
    (400 ms at 1,000,000 jobs with a type chosen)."""
    params: list[object] = [cap]
    where = filt.where(params, skip_status=True)
    rows = await conn.fetch(" UNION ALL ".join(
        f"SELECT {status_literal(status)} AS status, (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE status = "
        f"{status_literal(status)} AND {where} LIMIT $1) AS capped) AS n" for status in (only or Status)), *params)
    return StatusCounts({Status(r["status"]): r["n"] for r in rows}, cap)


async def fetch_records_page(conn: asyncpg.Connection, filt: JobFilter, *, before_seq: int | None = None,
                             limit: int = 50) -> tuple[list[JobRecord], int | None]:
    """Full job records newest first, enqueued before `before_seq`; and the seq to continue
    from (None when nothing follows)."""
    params: list[object] = []
    sql = in_enqueue_order(f"{JobRecord.COLUMNS}, seq", filt, params, descending=True, after_seq=before_seq,
                           limit=limit + 1)
    rows = await conn.fetch(sql, *params)
    records = [JobRecord.from_row({k: v for k, v in r.items() if k != "seq"}) for r in rows[:limit]]
    return records, (rows[limit - 1]["seq"] if len(rows) > limit else None)


async def type_status_counts(conn: asyncpg.Connection, statuses: Sequence[str],
                             cap: int = COUNT_CAP) -> dict[tuple[str, str], int]:
    """Jobs per (type, status) for these statuses; each status reads at most `cap` rows of the
    status index, so the query stays cheap however many failed jobs pile up. The statuses are
    written into the statement (see `status_counts`)."""
    if not statuses:
        return {}
    rows = await conn.fetch(" UNION ALL ".join(
        f"(SELECT {status_literal(Status(status))} AS status, type, count(*) AS n FROM (SELECT type FROM jobs "
        f"WHERE status = {status_literal(Status(status))} LIMIT $1) AS capped GROUP BY type)"
        for status in statuses), cap)
    return {(r["type"], r["status"]): r["n"] for r in rows}

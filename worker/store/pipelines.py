"""Read-side queries for pipelines: the list with derived status and progress, and one
pipeline's jobs as a graph.

A pipeline is every job sharing a `pipeline_id`; its first job (lowest `seq`) is its head, which
names it and orders the list. The list walks heads newest first and aggregates each pipeline
through `jobs_pipeline_idx`, so a screenful costs the same on a table of millions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

import asyncpg

from jobdesk.core.json_value import JsonObject
from jobdesk.core.models import Status
from jobdesk.store.jobs import escape_like, status_literal


class PipelineStatus(StrEnum):
    RUNNING = "running"
    WAITING_APPROVAL = "waiting_approval"
    FAILED = "failed"
    CANCELLED = "cancelled"
    COMPLETED = "completed"


# The derived status, from the counts below. A job that failed for good marks the pipeline
# failed even while other branches still run; a pipeline is cancelled once nothing is left to do
# and something was cancelled.
_DERIVED = """CASE WHEN a.completed = a.total THEN 'completed'
                   WHEN a.failed > 0 THEN 'failed'
                   WHEN a.waiting > 0 THEN 'waiting_approval'
                   WHEN a.queued + a.in_progress > 0 THEN 'running'
                   ELSE 'cancelled' END"""

_PIPELINES = f"""
{{candidates}}
SELECT * FROM (
    SELECT h.pipeline_id, h.seq AS head_seq,
           COALESCE(NULLIF(h.input_data->>'pipeline_name', ''), NULLIF(h.input_data->>'name', ''), h.type) AS name,
           a.total, a.completed, a.failed, a.cancelled, a.waiting, a.queued, a.in_progress,
           a.started_at, a.last_update, {_DERIVED} AS status
      FROM {{heads_from}}
     CROSS JOIN LATERAL (
        SELECT count(*) AS total,
               count(*) FILTER (WHERE status = 'completed') AS completed,
               count(*) FILTER (WHERE status = 'failed') AS failed,
               count(*) FILTER (WHERE status = 'cancelled') AS cancelled,
               count(*) FILTER (WHERE status = 'waiting_approval') AS waiting,
               count(*) FILTER (WHERE status = 'queued') AS queued,
               count(*) FILTER (WHERE status = 'in_progress') AS in_progress,
               min(created_at) AS started_at, max(updated_at) AS last_update
          FROM jobs j WHERE j.pipeline_id = h.pipeline_id) a
     WHERE h.pipeline_id IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM jobs e WHERE e.pipeline_id = h.pipeline_id AND e.seq < h.seq)
       AND {{heads}}
     ORDER BY h.seq DESC
) p
WHERE {{where}}
LIMIT {{limit}}
"""


# A pipeline with a derived status holds at least one job in these statuses, so the status index
# can find the candidates directly instead of walking every pipeline for the few that match.
# Moving pipelines are few; failed and cancelled jobs pile up, so those are counted first.
_JOB_STATUSES_OF = {"running": ["queued", "in_progress"], "waiting_approval": ["waiting_approval"],
                    "failed": ["failed"], "cancelled": ["cancelled"]}
_PILING_UP = {"failed", "cancelled"}
CANDIDATES_MAX = 10_000  # past this many matching jobs, walking the pipelines newest first is cheaper
_CANDIDATE_HEADS = """
WITH candidates AS (
    SELECT DISTINCT pipeline_id FROM ({jobs}) c
), head_rows AS (
    SELECT first.* FROM candidates c
     CROSS JOIN LATERAL (SELECT * FROM jobs f WHERE f.pipeline_id = c.pipeline_id ORDER BY f.seq LIMIT 1) first
)"""


def _pipelined_jobs(statuses: Sequence[str]) -> str:
    """The pipeline ids of jobs in these statuses, one walk per status: the statuses are written
    into the statement (an index whose predicate leaves some statuses out, such as
    jobs_status_idx without running jobs, serves only a status the planner can see)."""
    return " UNION ALL ".join(f"SELECT pipeline_id FROM jobs WHERE status = {status_literal(Status(s))} "
                              "AND pipeline_id IS NOT NULL" for s in statuses)


@dataclass(frozen=True)
class PipelineFilter:
    """What the user narrowed the pipeline list to. Empty fields do not filter."""

    statuses: frozenset[PipelineStatus] = frozenset()
    search: str | None = None  # substring of the pipeline id or its name
    created_from: datetime | None = None

    def where(self, params: list[object]) -> str:
        clauses: list[str] = []
        if self.statuses:
            params.append(sorted(str(s) for s in self.statuses))
            clauses.append(f"status = ANY(${len(params)}::text[])")
        if self.search and self.search.strip():
            params.append("%" + escape_like(self.search.strip()) + "%")
            clauses.append(f"(pipeline_id ILIKE ${len(params)} OR name ILIKE ${len(params)})")
        if self.created_from:
            params.append(self.created_from)
            clauses.append(f"started_at >= ${len(params)}")
        return " AND ".join(clauses) or "true"


@dataclass
class PipelineRow:
    """One line of the pipeline list."""

    pipeline_id: str
    head_seq: int
    name: str
    total: int
    completed: int
    failed: int
    cancelled: int
    waiting: int
    queued: int
    in_progress: int
    started_at: datetime
    last_update: datetime
    status: PipelineStatus

    @classmethod
    def from_record(cls, record: asyncpg.Record) -> PipelineRow:
        values = dict(record)
        values["status"] = PipelineStatus(values["status"])
        return cls(**values)

    @property
    def finished(self) -> bool:
        """Nothing in it can still move without an operator."""
        return self.queued + self.in_progress + self.waiting == 0

    def duration_s(self, now: datetime) -> float:
        end = self.last_update if self.finished else now
        return max(0.0, (end - self.started_at).total_seconds())


async def fetch_pipelines(conn: asyncpg.Connection, filt: PipelineFilter, *, after_seq: int | None = None,
                          limit: int = 200) -> tuple[list[PipelineRow], bool]:
    """One page of pipelines, newest first, whose head comes before `after_seq`; and whether
    more follow."""
    params: list[object] = []
    heads = "true"
    if after_seq is not None:
        params.append(after_seq)
        heads = f"h.seq < ${len(params)}"
    candidates, heads_from = "", "jobs h"
    job_statuses = await _candidate_statuses(conn, filt)
    if job_statuses:
        candidates, heads_from = _CANDIDATE_HEADS.format(jobs=_pipelined_jobs(job_statuses)), "head_rows h"
    where = filt.where(params)
    params.append(limit + 1)
    sql = _PIPELINES.format(candidates=candidates, heads_from=heads_from, heads=heads, where=where,
                            limit=f"${len(params)}")
    rows = await conn.fetch(sql, *params)
    return [PipelineRow.from_record(r) for r in rows[:limit]], len(rows) > limit


async def _candidate_statuses(conn: asyncpg.Connection, filt: PipelineFilter) -> list[str] | None:
    """The job statuses to find candidate pipelines by, or None to walk every pipeline."""
    if not filt.statuses or not all(s in _JOB_STATUSES_OF for s in filt.statuses):
        return None
    statuses = sorted({j for s in filt.statuses for j in _JOB_STATUSES_OF[s]})
    if _PILING_UP & set(filt.statuses):
        matching = await conn.fetchval(f"SELECT count(*) FROM ({_pipelined_jobs(statuses)} LIMIT $1) m",
                                       CANDIDATES_MAX + 1)
        if matching > CANDIDATES_MAX:
            return None
    return statuses


async def fetch_pipeline_rows(conn: asyncpg.Connection, pipeline_ids: Sequence[str],
                              filt: PipelineFilter = PipelineFilter()) -> list[PipelineRow]:
    """The current list rows of these pipelines that still match the filter (for live updates)."""
    params: list[object] = [list(pipeline_ids)]
    where = filt.where(params)
    params.append(len(pipeline_ids))
    sql = _PIPELINES.format(candidates="", heads_from="jobs h", heads="h.pipeline_id = ANY($1::text[])", where=where,
                            limit=f"${len(params)}")
    return [PipelineRow.from_record(r) for r in await conn.fetch(sql, *params)]


async def pipelines_of(conn: asyncpg.Connection, job_ids: Sequence[str]) -> set[str]:
    """The pipelines these jobs belong to."""
    rows = await conn.fetch("SELECT DISTINCT pipeline_id FROM jobs WHERE id = ANY($1::text[]) "
                            "AND pipeline_id IS NOT NULL", list(job_ids))
    return {r["pipeline_id"] for r in rows}


async def retryable_in(conn: asyncpg.Connection, pipeline_id: str) -> list[str]:
    """The failed and cancelled jobs of a pipeline, in enqueue order."""
    rows = await conn.fetch("SELECT id FROM jobs WHERE pipeline_id = $1 AND status IN ('failed', 'cancelled') "
                            "ORDER BY seq", pipeline_id)
    return [r["id"] for r in rows]


@dataclass
class GraphNode:
    """A job of a pipeline, as the DAG view draws it."""

    id: str
    type: str
    status: Status
    attempts: int
    retry_count: int
    depends_on: list[str]
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    updated_at: datetime
    seq: int
    spawned_by: str | None = None  # the job whose `job.spawn` created this one

    def elapsed_s(self, now: datetime) -> float | None:
        """How long it ran (or has been running); None before it started."""
        if self.started_at is None:
            return None
        if self.status == Status.IN_PROGRESS:
            end = now
        else:
            end = self.completed_at or self.updated_at
        return max(0.0, (end - self.started_at).total_seconds())


GRAPH_LIMIT = 5000


async def fetch_graph(conn: asyncpg.Connection, pipeline_id: str, *,
                      limit: int = GRAPH_LIMIT) -> tuple[list[GraphNode], bool]:
    """The pipeline's jobs in enqueue order (at most `limit`), and whether there are more."""
    rows = await conn.fetch("""
        SELECT id, type, status, attempts, retry_count, COALESCE(dependent_on_jobs, '[]') AS deps,
               created_at, started_at, completed_at, updated_at, seq, spawned_by
          FROM jobs WHERE pipeline_id = $1 ORDER BY seq LIMIT $2""", pipeline_id, limit + 1)
    nodes = [GraphNode(id=r["id"], type=r["type"], status=Status(r["status"]), attempts=r["attempts"],
                       retry_count=r["retry_count"], depends_on=[str(d) for d in r["deps"]],
                       created_at=r["created_at"], started_at=r["started_at"], completed_at=r["completed_at"],
                       updated_at=r["updated_at"], seq=r["seq"], spawned_by=r["spawned_by"])
             for r in rows[:limit]]
    return nodes, len(rows) > limit


@dataclass
class PipelineStep:
    """A job of a pipeline as a step indicator shows it."""

    id: str
    type: str
    status: Status
    dependent_on_jobs: list[str]
    retry_count: int
    started_at: datetime | None
    completed_at: datetime | None
    error_message: str | None

    def to_json(self) -> JsonObject:
        return {"id": self.id, "type": self.type, "status": str(self.status),
                "dependent_on_jobs": self.dependent_on_jobs, "retry_count": self.retry_count,
                "started_at": self.started_at.isoformat() if self.started_at else None,
                "completed_at": self.completed_at.isoformat() if self.completed_at else None,
                "error_message": self.error_message}


async def fetch_steps(conn: asyncpg.Connection, pipeline_id: str, *, limit: int = GRAPH_LIMIT) -> list[PipelineStep]:
    """The pipeline's jobs in enqueue order (at most `limit`)."""
    rows = await conn.fetch("""
        SELECT id, type, status, COALESCE(dependent_on_jobs, '[]') AS deps, retry_count, started_at,
               completed_at, error_message
          FROM jobs WHERE pipeline_id = $1 ORDER BY seq LIMIT $2""", pipeline_id, limit)
    return [PipelineStep(r["id"], r["type"], Status(r["status"]), [str(d) for d in r["deps"]], r["retry_count"],
                         r["started_at"], r["completed_at"], r["error_message"]) for r in rows]

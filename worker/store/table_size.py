"""The size of `jobs`, every partition included (sql/041), and what the last retention run did:
the status bar's words in the console and `jobdesk stats`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncpg

COUNTED_ROWS_CAP = 100_000  # a table not analysed yet is counted up to this many rows (a short scan)


@dataclass(frozen=True)
class LastPrune:
    """What the last retention run did (jobdesk_leases.last_result): when, the partitions of
    completed jobs it dropped and about how many jobs went with them, and the rows it deleted."""

    at: datetime
    dropped_partitions: int
    dropped_jobs: int
    deleted: dict[str, int]

    def describe(self) -> str:
        parts = []
        if self.dropped_partitions:
            plural = "" if self.dropped_partitions == 1 else "s"
            parts.append(f"dropped {self.dropped_partitions} partition{plural} "
                         f"(≈ {self.dropped_jobs:,} completed jobs)")
        deleted = ", ".join(f"{n:,} {what}" for what, n in self.deleted.items() if n)
        if deleted:
            parts.append(f"deleted {deleted}")
        return "; ".join(parts) or "nothing to remove"


@dataclass(frozen=True)
class TableSize:
    estimated_rows: int | None  # pg_class.reltuples; None before the table was first analysed
    total_bytes: int
    # Before the first analysis: the rows counted, up to COUNTED_ROWS_CAP (None once estimated).
    counted_rows: int | None = None
    partitions: int = 0  # of completed jobs (sql/041), `jobs_completed_later` included
    last_prune: LastPrune | None = None

    def to_json(self) -> dict[str, object]:
        prune = self.last_prune
        return {"estimated_rows": self.estimated_rows, "total_bytes": self.total_bytes,
                "counted_rows": self.counted_rows, "completed_partitions": self.partitions,
                "last_prune": None if prune is None else {
                    "at": prune.at.isoformat(), "dropped_partitions": prune.dropped_partitions,
                    "dropped_jobs": prune.dropped_jobs, "deleted": prune.deleted}}

    @property
    def counted_past_cap(self) -> bool:
        return self.counted_rows is not None and self.counted_rows > COUNTED_ROWS_CAP


# `jobs` and every partition under it (sql/041): a partitioned table has no rows or size of its own.
# No estimate while a partition that holds rows has not been analysed yet: the rows are counted then.
TABLE_SIZE_SQL = """
SELECT CASE WHEN bool_or(c.reltuples < 0 AND pg_relation_size(c.oid) > 0) THEN NULL
            ELSE sum(GREATEST(c.reltuples, 0))::bigint END
           AS estimated_rows,
       coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint AS total_bytes,
       (SELECT count(*) FROM pg_inherits WHERE inhparent = to_regclass('jobs_completed'))::int AS partitions,
       (SELECT last_run_at FROM jobdesk_leases WHERE name = 'pruner') AS pruned_at,
       (SELECT last_result::text FROM jobdesk_leases WHERE name = 'pruner') AS pruned
  FROM pg_partition_tree('jobs') t JOIN pg_class c ON c.oid = t.relid
 WHERE t.isleaf
"""

async def fetch_table_size(conn: asyncpg.Connection) -> TableSize:
    """The planner's estimate of the rows; until autovacuum first analyses the table (a young or
    small one, which the estimate leaves at -1) the rows counted, up to a cap, so there is a number."""
    row = await conn.fetchrow(TABLE_SIZE_SQL)
    counted = None
    if row["estimated_rows"] is None:
        counted = await conn.fetchval("SELECT count(*) FROM (SELECT 1 FROM jobs LIMIT $1) AS capped",
                                      COUNTED_ROWS_CAP + 1)
    return TableSize(row["estimated_rows"], row["total_bytes"], counted, row["partitions"],
                     _last_prune(row["pruned_at"], row["pruned"]))


def _last_prune(at: datetime | None, text: str | None) -> LastPrune | None:
    if at is None or not text:
        return None
    result = json.loads(text)
    dropped = result.get("dropped") or []
    counts = dict(result.get("counts") or {})
    return LastPrune(at, len(dropped), sum(int(d.get("jobs") or 0) for d in dropped),
                     {k: int(v) for k, v in counts.items() if not (k == "completed" and dropped)})

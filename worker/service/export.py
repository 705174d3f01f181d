"""Export: the jobs a filter matches, every column with `id` first, written as CSV (a header row,
quoted where a value needs it, by the csv module) or JSON lines (one object a job), streamed a
keyset page at a time so that 1,000,000 jobs never sit in memory. `jobdesk export` writes to
stdout, the console's Export… to a file; both through `JobExport.export_jobs`."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from datetime import datetime
from typing import TextIO

from jobdesk.core.errors import InvalidJob
from jobdesk.service.base import ServiceBase
from jobdesk.store import export as export_queries
from jobdesk.store.jobs import JobFilter

FORMATS = ("csv", "jsonl")


def _json_ready(value: object) -> object:
    """A column's value as JSON holds it: times in ISO 8601, the rest as asyncpg read it."""
    return value.isoformat() if isinstance(value, datetime) else value


def csv_cell(value: object) -> str:
    """A column's value in a CSV cell: empty for NULL, JSON for documents and lists, ISO times,
    true/false for booleans."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


class JobExport(ServiceBase):
    """Exports of the jobs a filter matches."""

    async def export_jobs(self, filt: JobFilter, fmt: str, out: TextIO, *,
                          progress: Callable[[int], None] | None = None) -> int:
        """Write the matching jobs to `out` in `fmt` (csv or jsonl), newest first; the number
        written. `progress(n)` is called after each page."""
        if fmt not in FORMATS:
            raise InvalidJob(f"unknown export format {fmt!r}: use csv or jsonl")
        filt = self._scope(filt)
        pool = await self._read_pool()
        async with pool.acquire() as conn:
            columns = await export_queries.job_columns(conn)
        writer = csv.writer(out) if fmt == "csv" else None
        if writer is not None:
            writer.writerow(columns)
        written, before = 0, None
        while True:
            async with pool.acquire() as conn:  # one page per statement: no transaction held across pages
                rows, before = await export_queries.export_page(conn, filt, columns, before_seq=before)
            for row in rows:
                if writer is not None:
                    writer.writerow([csv_cell(row[c]) for c in columns])
                else:
                    out.write(json.dumps({c: _json_ready(row[c]) for c in columns}, ensure_ascii=False) + "\n")
            written += len(rows)
            if progress is not None:
                progress(written)
            if before is None:
                return written

"""Every column of the jobs a filter matches, in keyset pages of enqueue order: what an export
writes. A page is one short statement (`jobs.in_enqueue_order`), so an export of 1,000,000 jobs
holds one page in memory and no transaction open between pages."""

from __future__ import annotations

import asyncpg

from jobdesk.store.jobs import JobFilter, in_enqueue_order

EXPORT_PAGE = 1000


async def job_columns(conn: asyncpg.Connection) -> list[str]:
    """The columns of `jobs`, `id` first, then in the table's order (a later migration's columns
    are exported with the rest, without a change here)."""
    names = [a.name for a in (await conn.prepare("SELECT * FROM jobs LIMIT 0")).get_attributes()]
    return ["id", *(n for n in names if n != "id")]


async def export_page(conn: asyncpg.Connection, filt: JobFilter, columns: list[str], *, before_seq: int | None,
                      limit: int = EXPORT_PAGE) -> tuple[list[asyncpg.Record], int | None]:
    """Up to `limit` jobs matching `filt`, newest first, enqueued before `before_seq`, with
    `columns`; and the seq to go on from (None after the last page)."""
    params: list[object] = []
    # Names read from the catalog, quoted as identifiers; `seq` is among them (the keyset).
    quoted = ", ".join('"' + c.replace('"', '""') + '"' for c in columns)
    sql = in_enqueue_order(quoted, filt, params, descending=True, after_seq=before_seq, limit=limit)
    rows = await conn.fetch(sql, *params)
    return list(rows), (rows[-1]["seq"] if len(rows) == limit else None)

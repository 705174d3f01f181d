"""A job found by a part of its id, as people copy it: the whole id, the short id that tables
print (its last 8 characters), or any part of at least `MIN_PART` characters from its start or
its end. Each is one index lookup on a table of any size."""

from __future__ import annotations

import asyncpg

MIN_PART = 8  # the short id's length: a shorter part would match too many jobs to be of use
TAIL = 8  # the length that jobs_id_tail_idx (sql/037) indexes
MATCH_CAP = 1000  # matches counted up to this, to say how ambiguous a part is

# A part of an id: the jobs whose id starts or ends with it (`user_id` NULL: anybody's), up to
# the cap. The start is a range of the primary key, and the end the index of tails; starts_with
# and right() then keep exactly the ids that start or end with the part.
_MATCHES = f"""
    SELECT id FROM (
        SELECT id, user_id FROM jobs
         WHERE id >= $1 AND ($2::text IS NULL OR id < $2) AND starts_with(id, $1)
        UNION
        SELECT id, user_id FROM jobs
         WHERE right(id, {TAIL}) = right($1, {TAIL}) AND right(id, length($1)) = $1
    ) m
     WHERE $3::int IS NULL OR user_id = $3
     LIMIT {MATCH_CAP}"""


def range_end(prefix: str) -> str | None:
    """A string after every id that starts with `prefix`, in the database's collation: the
    prefix up to its last letter or digit, which is raised by one (9 to a, so that the bound
    stays a letter or digit). That holds in the C collation, and also in the collations of
    glibc and ICU, whose first level ignores hyphens (ids are hex digits and hyphens, or a
    custom id's letters, digits and punctuation). None: no end (`zzz...`)."""
    chars = list(prefix)
    while chars:
        last = chars.pop()
        if "0" <= last <= "8" or "a" <= last <= "y" or "A" <= last <= "Y":
            return "".join(chars) + chr(ord(last) + 1)
        if last == "9":
            return "".join(chars) + "a"
    return None


async def match_job_ids(conn: asyncpg.Connection, part: str, user_id: int | None = None) -> list[str]:
    """The ids of the jobs (of `user_id`, if given) that `part` names: the one whose id it is,
    else those whose id starts or ends with it, up to MATCH_CAP. None for a part shorter than
    MIN_PART that is no whole id."""
    exact = await conn.fetchval("SELECT id FROM jobs WHERE id = $1 AND ($2::int IS NULL OR user_id = $2)",
                                part, user_id)
    if exact is not None or len(part) < MIN_PART:
        return [] if exact is None else [exact]
    return [r["id"] for r in await conn.fetch(_MATCHES, part, range_end(part), user_id)]

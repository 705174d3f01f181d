"""Job ids as people give them: whole, or the short id a table prints, or a part from the start
or the end of one. Every door that takes a job id from a person (the CLI's commands, and any
other) turns it into the whole id here, with `resolve_job_id`, before it reads or acts."""

from __future__ import annotations

from collections.abc import Sequence

from jobdesk.core.errors import AmbiguousJobId, JobNotFound
from jobdesk.service.base import ServiceBase
from jobdesk.store.job_ids import MATCH_CAP, MIN_PART, match_job_ids


class JobIds(ServiceBase):
    """The whole id of a job named by a part of its id."""

    async def resolve_job_id(self, given: str) -> str:
        """The id of the one job (visible to this service) that `given` names: its whole id, its
        short id (the last 8 characters, as `jobdesk jobs` prints it), or any part of at least 8
        characters from the start or the end of its id. A custom id that a table shortened to
        `abcdefghij…` is found by what precedes the `…`.

        JobNotFound when no job matches; AmbiguousJobId, saying how many do, when more than one."""
        part = given.strip().removesuffix("…")
        async with (await self._read_pool()).acquire() as conn:
            found = await match_job_ids(conn, part, self.user_id)
        if not found and self.replica is not None:  # not on the replica yet: just enqueued, perhaps
            async with self.pool.acquire() as conn:
                found = await match_job_ids(conn, part, self.user_id)
        if len(found) == 1:
            return found[0]
        if not found:
            short = f" (a part of an id needs at least {MIN_PART} characters)" if len(part) < MIN_PART else ""
            raise JobNotFound(f"no job with id {given}{short}")
        count = f"{MATCH_CAP:,} or more" if len(found) >= MATCH_CAP else f"{len(found):,}"
        raise AmbiguousJobId(f"{given} matches {count} jobs; give more of the id")

    async def resolve_job_ids(self, given: Sequence[str]) -> list[str]:
        """`resolve_job_id` of each, in the order given: all are resolved before any is acted on."""
        return [await self.resolve_job_id(part) for part in given]

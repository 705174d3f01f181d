"""Who may change what, for every door: an action on a connection whose role cannot change jobs (a
viewer) is refused before it starts, so nothing is half-done, and a permission error PostgreSQL
raises anyway is said in the same words. `jobdesk grant` makes a role a viewer or an operator.

    @acts            # refused up front on a viewer's connection; a permission error is mapped
    async def cancel(self, job_ids): ...

    @writes          # no question first (the hot path of enqueueing); a permission error is mapped
    async def enqueue(self, ...): ...
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Concatenate, ParamSpec, TypeVar

import asyncpg

from jobdesk.core.errors import JobdeskError, MissingGrant, ReadOnlyRole
from jobdesk.service.base import ServiceBase
from jobdesk.store import grants

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound=ServiceBase)


async def check_can_act(service: ServiceBase) -> None:
    """ReadOnlyRole when this service's role cannot change jobs."""
    role = await grants.role_that_cannot_act(service.pool)
    if role is not None:
        raise ReadOnlyRole(role)


async def refusal(service: ServiceBase, exc: asyncpg.InsufficientPrivilegeError) -> JobdeskError:
    """What a permission error means: a viewer's role (ReadOnlyRole), or an operator's role that
    misses a grant on a table added since it was granted (MissingGrant)."""
    role = await grants.role_that_cannot_act(service.pool)
    if role is not None:
        return ReadOnlyRole(role)
    who = await service.pool.fetchval("SELECT current_user::text")
    first = str(exc).splitlines()[0]
    return MissingGrant(f"{first}: role {who} misses a grant, maybe on a table added by a later migration; "
                        f"the tables' owner runs `jobdesk grant operator {who}` again")


def writes(method: Callable[Concatenate[S, P], Awaitable[R]]) -> Callable[Concatenate[S, P], Awaitable[R]]:
    """A write whose permission error is said as ReadOnlyRole or MissingGrant."""
    @functools.wraps(method)
    async def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(self, *args, **kwargs)
        except asyncpg.InsufficientPrivilegeError as exc:
            raise await refusal(self, exc) from None
    return run


def acts(method: Callable[Concatenate[S, P], Awaitable[R]]) -> Callable[Concatenate[S, P], Awaitable[R]]:
    """An operator's action: refused before it starts on a role that cannot change jobs."""
    mapped = writes(method)

    @functools.wraps(method)
    async def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        await check_can_act(self)
        return await mapped(self, *args, **kwargs)
    return run


class AccessControl(ServiceBase):
    """Grants, and whether this connection may change anything."""

    async def grant_role(self, level: str, role: str) -> str:
        """Make `role` a viewer or an operator (`jobdesk.store.grants`); returns the tables' owner,
        whose later tables the grants cover too."""
        async with self.pool.acquire() as conn:
            return await grants.grant(conn, level, role)

    async def write_refusal(self) -> str | None:
        """Why nothing can be changed through this service, in a few words (a viewer's role, a
        standby, read-only sessions); None when actions can go ahead."""
        return await grants.write_refusal(self.pool)

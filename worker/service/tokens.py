"""The HTTP API's tokens: made, listed, revoked, and looked up for a request."""

from __future__ import annotations

from jobdesk.service.access import acts
from jobdesk.service.base import ServiceBase
from jobdesk.store import tokens
from jobdesk.store.tokens import TokenRecord


class TokenStore(ServiceBase):
    """The HTTP API's tokens."""

    @acts
    async def create_token(self, name: str, *, user_id: int | None = None, scopes: list[str] | None = None) -> str:
        async with self.pool.acquire() as conn:
            return await tokens.create(conn, name, user_id=user_id, scopes=scopes)

    async def list_tokens(self) -> list[TokenRecord]:
        async with self.pool.acquire() as conn:
            return await tokens.list_live(conn)

    @acts
    async def revoke_token(self, name: str) -> None:
        async with self.pool.acquire() as conn:
            await tokens.revoke(conn, name)

    async def authenticate(self, token: str) -> TokenRecord | None:
        async with self.pool.acquire() as conn:
            return await tokens.lookup(conn, token)

    async def has_tokens(self) -> bool:
        async with self.pool.acquire() as conn:
            return await tokens.any_live(conn)

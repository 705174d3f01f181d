"""Text PostgreSQL cannot store (NUL, unpaired surrogates) is a 422, not a server error."""

from __future__ import annotations

import pytest

from tests.api.conftest import Api


@pytest.mark.parametrize("body", [
    '{"type": "a", "input_data": {"\\u00aa\\udad4\\udd72t\\udae8\\u0000": {"E": 1}}}',
    '{"type": "a", "input_data": {"a": "\\u0000"}}',
    '{"type": "a", "input_data": {"a": "\\udad4"}}',
    '{"type": "\\u0000", "input_data": {}}',
    '{"type": "\\udad4", "input_data": {}}',
    '{"type": "a", "input_data": {}, "unique_key": "\\udad4"}',
])
async def test_unstorable_text_is_422(api: Api, body: str) -> None:
    r = await api.client.post("/api/jobs", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert await api.service.pool.fetchval("SELECT count(*) FROM jobs") == 0

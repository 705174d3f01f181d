"""Events for durable processors: `emit_event` wakes every job waiting on a key
(`job.wait_for_event`), from a backend, the CLI or the HTTP API."""

from __future__ import annotations

import json

from jobdesk.core.errors import InvalidJob
from jobdesk.core.json_value import JsonValue
from jobdesk.core.validation import json_text
from jobdesk.service.access import acts
from jobdesk.service.base import ServiceBase
from jobdesk.store import durable

MAX_KEY_LENGTH = 255


def check_event(key: object, payload: object) -> str:
    """The key, or InvalidJob naming what is wrong with the event."""
    if not isinstance(key, str) or not key.strip():
        raise InvalidJob("an event needs a non-empty key", field="key")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidJob(f"an event key is at most {MAX_KEY_LENGTH} characters, not {len(key)}", field="key")
    if "\x00" in key:
        raise InvalidJob("an event key contains a NUL character (\\x00), which PostgreSQL cannot store", field="key")
    try:
        json.dumps(payload, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidJob(f"the event's payload is not JSON: {exc}", field="payload") from None
    json_text(payload, "the event's payload", field="payload")  # a NUL or a lone surrogate, which jsonb refuses
    return key


class Events(ServiceBase):
    """Emitting events."""

    @acts
    async def emit_event(self, key: str, payload: JsonValue = None) -> bool:
        """Emit event `key` with a JSON `payload`: every job waiting on it wakes, and a job that
        waits on it later finds it at once. The first emit of a key wins; True if this was it
        (a later emit changes nothing and returns False)."""
        check_event(key, payload)
        async with self.pool.acquire() as conn:
            return await durable.emit_event(conn, key, payload)

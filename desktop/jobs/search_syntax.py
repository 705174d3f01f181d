"""The job search box's language, parsed without Qt:

    status:failed type:video.* pipeline:ID user:3 error:"timeout" free text

`key:value` terms narrow the filter (a value may be quoted to hold spaces; `status` takes a
comma-separated list and may repeat); whatever is left is free text, searched in id, type, error
and input. A bad term is reported as a message and left out, never raised."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace

from jobdesk.core.models import Status
from jobdesk.store.jobs import JobFilter

# key: what it matches, for completion and the inline help
KEYS: dict[str, str] = {
    "status": "one or more statuses, comma-separated",
    "type": "a job type; a trailing * matches a prefix (video.*)",
    "pipeline": "a pipeline id",
    "user": "a user id (a number)",
    "error": "text in the error message (quote it to include spaces)",
}
# A term looks like `word:…`; anything else (including a bare `:`) is free text.
_TERM = re.compile(r"^([A-Za-z_]+):(.*)$", re.DOTALL)


@dataclass(frozen=True)
class ParsedSearch:
    """The filter a search text describes, and what was wrong with it (one message per bad term)."""

    filter: JobFilter
    errors: list[str] = field(default_factory=list)


def parse_search(text: str, base: JobFilter | None = None) -> ParsedSearch:
    """Read `text` into a copy of `base`: its terms replace the fields they name."""
    base = base or JobFilter()
    errors: list[str] = []
    try:
        words = shlex.split(text)
    except ValueError:  # an unbalanced quote: read it as if it were closed
        errors.append("a quote is not closed")
        try:
            words = shlex.split(text + '"')
        except ValueError:
            words = shlex.split(text + "'")
    changes: dict[str, object] = {}
    statuses: set[Status] = set()
    free: list[str] = []
    for word in words:
        match = _TERM.match(word)
        if match is None:
            free.append(word)
            continue
        key, value = match.group(1).lower(), match.group(2).strip()
        if key not in KEYS:
            errors.append(f"unknown key {key!r}: use {', '.join(k + ':' for k in KEYS)}")
            continue
        if not value:
            errors.append(f"{key}: needs a value ({KEYS[key]})")
            continue
        if key == "status":
            for name in (v.strip().lower() for v in value.split(",") if v.strip()):
                try:
                    statuses.add(Status(name))
                except ValueError:
                    errors.append(f"unknown status {name!r}: use {', '.join(s.value for s in Status)}")
        elif key == "type":
            if "*" in value:
                changes.update(type=None, type_pattern=value)
            else:
                changes.update(type=value, type_pattern=None)
        elif key == "pipeline":
            changes["pipeline_id"] = value
        elif key == "user":
            if value.isdigit():
                changes["user_id"] = int(value)
            else:
                errors.append(f"user: {value!r} is not a number")
        elif key == "error":
            changes["error"] = value
    if statuses:
        changes["statuses"] = frozenset(statuses)
    changes["search"] = " ".join(free) or None
    return ParsedSearch(replace(base, **changes), errors)  # type: ignore[arg-type]


def completions() -> list[str]:
    """What the search box offers to complete: every key, and every `status:` value."""
    return [f"{key}:" for key in KEYS] + [f"status:{s.value}" for s in Status]

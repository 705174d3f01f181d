"""The fingerprint of an error: what stays the same when the same failure happens again.

It is the error's first line (`ErrorClass: message`), with the parts that change from one
occurrence to the next replaced by placeholders: quoted values (`<str>`), UUIDs (`<id>`),
timestamps (`<time>`), hex values (`<hex>`) and numbers (`<n>`). So

    ConnectionError: upstream 'api-7.example.com' refused after 3 tries

becomes `ConnectionError: upstream <str> refused after <n> tries`. The worker stores it beside
the error when an attempt fails, so grouping failures reads an index instead of running these
expressions over every row.
"""

from __future__ import annotations

import re

MAX_LENGTH = 300  # longer fingerprints are cut: the start of a message tells the groups apart
NO_ERROR = "(no error message)"

# Order matters: a quoted value may hold numbers, a UUID holds hex and digits.
_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`|‘[^’\n]*’|“[^”\n]*”"), "<str>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE), "<id>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b"),
     "<time>"),
    # 0x-prefixed, or a run of 8+ hex digits holding both a digit and a letter (hashes, object ids).
    (re.compile(r"\b0x[0-9a-f]+\b|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b", re.IGNORECASE), "<hex>"),
    (re.compile(r"(?<![\w<])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w>])", re.IGNORECASE), "<n>"),
    (re.compile(r"\s+"), " "),
)


def fingerprint(error: str | None) -> str:
    """The fingerprint of an error message (only its first line counts)."""
    if not error or not error.strip():
        return NO_ERROR
    line = error.strip().splitlines()[0]
    for pattern, placeholder in _RULES:
        line = pattern.sub(placeholder, line)
    return line.strip()[:MAX_LENGTH] or NO_ERROR

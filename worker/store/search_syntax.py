"""The job search language, parsed in one place for the console's search box, `jobdesk jobs
--search` and `GET /api/jobs?q=`:

    status:failed type:video.* pipeline:ID user:3 error:"timeout" input.user.plan:business free text

`key:value` terms narrow the filter (a value may be quoted to hold spaces; `status` takes a
comma-separated list and may repeat); whatever is left is free text, searched in id, type, error
and input. A bad term is reported as a message and left out, never raised: the console shows the
messages under the box and filters by the rest; the CLI and the API refuse the query with them.

`input.PATH:VALUE` matches jobs whose input holds exactly VALUE at PATH, from the root of the
input (`input.user.plan` is `input_data->'user'->'plan'`). The value is typed as JSON reads it
unquoted: `42` is the number 42 (not 420, not the string "42"), `true`/`false` the booleans,
`null` a JSON null; anything else is a string compared whole (`business` is not
`businessplus`). Quoted, a value is always a string: `input.order_id:"42"` is the string "42".
Each term becomes `input_data @> '{"user":{"plan":"business"}}'`, served by the GIN index of
sql/030, which holds the non-empty inputs (sql/040)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace

from jobdesk.core.models import Status
from jobdesk.core.pg_text import storable_text
from jobdesk.store.jobs import InputTerm, JobFilter, Scalar

# key: what it matches, for completion and the inline help
KEYS: dict[str, str] = {
    "status": "one or more statuses, comma-separated",
    "type": "a job type; a trailing * matches a prefix (video.*)",
    "pipeline": "a pipeline id",
    "user": "a user id (a number)",
    "error": "text in the error message (quote it to include spaces)",
}
INPUT_KEY = "input.PATH"
INPUT_HELP = ("exactly this value at PATH in the input (input.user.plan:business, input.order_id:42); "
              "numbers, true, false and null are typed, quoted values are strings")
# A term looks like `word:…` (or `input…:…`, read whole so that a bad path is named); anything
# else (including a bare `:`) is free text.
_TERM = re.compile(r"^([A-Za-z_]+):(.*)$", re.DOTALL)
_SEGMENT = re.compile(r"^[A-Za-z0-9_\-]+$")
_NUMBER = re.compile(r"^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$")
MAX_PATH_DEPTH = 32


@dataclass(frozen=True)
class ParsedSearch:
    """The filter a search text describes, and what was wrong with it (one message per bad term)."""

    filter: JobFilter
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Word:
    text: str  # quotes removed
    value_quoted: bool  # the part after the first `:` began with a quote


def _split(text: str) -> tuple[list[_Word], bool]:
    """Shell-like words: whitespace separates them outside quotes, quotes are removed, a backslash
    escapes the next character (outside single quotes). Returns the words and whether a quote was
    left open (the word is closed as if it had been)."""
    words: list[_Word] = []
    buf: list[str] = []
    started = quoted = False
    quote: str | None = None
    chars = iter(text)
    for ch in chars:
        if quote is None and ch.isspace():
            if started:
                words.append(_Word("".join(buf), quoted))
            buf, started, quoted = [], False, False
            continue
        if ch == "\\" and quote != "'":
            buf.append(next(chars, ""))
        elif quote is not None and ch == quote:
            quote = None
        elif quote is None and ch in "\"'":
            quote = ch
            if buf and ":" in buf and buf.index(":") == len(buf) - 1:
                quoted = True
        else:
            buf.append(ch)
        started = True
    if started:
        words.append(_Word("".join(buf), quoted))
    return words, quote is not None


def input_value(raw: str, quoted: bool) -> tuple[Scalar, str | None]:
    """The JSON value an `input.PATH:` term compares with, or an error message."""
    if quoted:
        return raw, None
    if raw in ("true", "false"):
        return raw == "true", None
    if raw == "null":
        return None, None
    if _NUMBER.match(raw):
        number: int | float = json.loads(raw)
        if isinstance(number, float) and not math.isfinite(number):
            return None, f"{raw} is not a finite number"
        return number, None
    return raw, None


def input_path(key: str) -> tuple[tuple[str, ...], str | None]:
    """The object keys of `input.a.b` from the input's root, or a message saying what is wrong."""
    rest = key[len("input"):]
    if not rest or rest == ".":
        return (), f"{key}: name a path inside the input, like input.user.plan:business"
    segments = rest[1:].split(".")
    if rest[0] != "." or any(not _SEGMENT.match(s) for s in segments):
        return (), (f"{key}: malformed path; write input. then keys joined by dots, each of letters, digits, "
                    f"_ or - (input.user.plan)")
    if len(segments) > MAX_PATH_DEPTH:
        return (), f"{key}: the path is deeper than {MAX_PATH_DEPTH} keys"
    return tuple(segments), None


def parse_search(text: str, base: JobFilter | None = None) -> ParsedSearch:
    """Read `text` into a copy of `base`: its terms replace the fields they name (input terms add up)."""
    base = base or JobFilter()
    words, open_quote = _split(text)
    errors: list[str] = ["a quote is not closed"] if open_quote else []
    changes: dict[str, object] = {}
    statuses: set[Status] = set()
    inputs: list[InputTerm] = []
    free: list[str] = []
    for word in words:
        head, colon, rest = word.text.partition(":")
        if colon and (head.lower() == "input" or head.lower().startswith("input.")):
            term, error = _input_term(head, rest, word.value_quoted)
            if error:
                errors.append(error)
            elif term is not None:
                inputs.append(term)
            continue
        match = _TERM.match(word.text)
        if match is None:
            free.append(word.text)
            continue
        key, value = match.group(1).lower(), match.group(2).strip()
        if key not in KEYS:
            errors.append(f"unknown key {key!r}: use {', '.join(k + ':' for k in KEYS)}, {INPUT_KEY}:")
            continue
        if not value:
            errors.append(f"{key}: needs a value ({KEYS[key]})")
            continue
        errors.extend(_apply(key, value, changes, statuses))
    if statuses:
        changes["statuses"] = frozenset(statuses)
    if inputs:
        changes["input_terms"] = (*base.input_terms, *inputs)
    changes["search"] = " ".join(free) or None
    return ParsedSearch(replace(base, **changes), errors)  # type: ignore[arg-type]


def _input_term(key: str, value: str, quoted: bool) -> tuple[InputTerm | None, str | None]:
    path, error = input_path(key)
    if error:
        return None, error
    if not value and not quoted:
        return None, f"{key}: needs a value ({INPUT_HELP})"
    typed, error = input_value(value, quoted)
    if error:
        return None, f"{key}: {error}"
    if isinstance(typed, str) and not storable_text(typed):
        return None, f"{key}: the value holds a NUL character or an unpaired surrogate"
    return InputTerm(path, typed), None


def _apply(key: str, value: str, changes: dict[str, object], statuses: set[Status]) -> list[str]:
    """Put one `key:value` term (not an input term) into `changes`; its problems, if any."""
    errors: list[str] = []
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
    return errors


def completions() -> list[str]:
    """What the search box offers to complete: every key, `input.`, and every `status:` value."""
    return [f"{key}:" for key in KEYS] + ["input."] + [f"status:{s.value}" for s in Status]

"""Text that PostgreSQL can store: no NUL character and no unpaired surrogate (which UTF-8, and so
a text column or jsonb, cannot hold). One test for the checks of a new job and for what a running
job reports."""

from __future__ import annotations


def is_unicode(text: str) -> bool:
    """False for a string holding an unpaired surrogate, which UTF-8 cannot encode. ASCII text,
    nearly every job's, is answered without encoding it."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def storable_text(text: str) -> bool:
    """Whether PostgreSQL can store this string: no NUL character, no unpaired surrogate."""
    return "\x00" not in text and is_unicode(text)


def escaped(text: str) -> str:
    """`text` as PostgreSQL can store it: NUL characters and unpaired surrogates written out as
    backslash escapes (`\\x00`, `\\udc80`), everything else unchanged."""
    if storable_text(text):
        return text
    return text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")

"""Sizes in bytes as people write them in settings: `512MB`, `1.5GB`, `800K`, or plain bytes.

Units count in powers of 1024, as `ps` and `top` count resident memory: `K`, `KB` and `KiB` are
1,024 bytes, `M`, `MB` and `MiB` 1,048,576, and so on to `T`. Case does not matter."""

from __future__ import annotations

import re

_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:([kmgt])(?:i?b)?|(b))?\s*$")


def parse_size(text: str) -> int:
    """Bytes in `512MB`, `2G`, `1.5GiB` or `1048576`; ValueError unless it is more than 0."""
    match = _SIZE.match(str(text).lower())
    if not match:
        raise ValueError(f"{text!r} is not a size; write it like 512MB, 2GB or a number of bytes")
    size = int(float(match.group(1)) * _UNITS[match.group(2) or match.group(3) or ""])
    if size <= 0:
        raise ValueError(f"{text!r}: a size must be more than 0 bytes")
    return size


def format_size(size: int) -> str:
    """The shortest exact form of `size` bytes: `512MB`, `3GB`, `1000B`."""
    for unit in ("t", "g", "m", "k"):
        if size >= _UNITS[unit] and size % _UNITS[unit] == 0:
            return f"{size // _UNITS[unit]}{unit.upper()}B"
    return f"{size}B"


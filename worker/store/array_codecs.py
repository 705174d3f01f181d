"""The codecs of PostgreSQL's built-in array types, given to each connection without asking.

asyncpg knows the scalar types by heart, but learns an array type (`varchar[]`, `bigint[]`,
`float8[]`: anything but `text[]`) from the server the first time a statement of the
connection takes or returns one: `jit` read and turned off, a recursive query of the catalog,
`jit` set back. On a new server session, with a cold catalog cache, that is 2 to 6 ms on this
machine, paid before the statement runs: by the worker's first claim, by each connection a
pool opens under load, and by every command of the CLI that reads a list.

The built-in array types and their elements have the same OIDs on every PostgreSQL (they are
fixed in its catalog since 8.x), so the answer to that question is known beforehand. This module
gives asyncpg the rows its introspection would have returned, through the connection's codec
settings, as asyncpg itself does with the introspection's answer. That setting is asyncpg's own,
not its public API: if it is missing or refuses the rows, nothing is declared and asyncpg asks the
server as before (`tests/store/test_array_codecs.py` checks that it is not asked).
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

# array OID: (element OID, element type name), from PostgreSQL's pg_type.dat.
BUILTIN_ARRAYS: dict[int, tuple[int, str]] = {
    1000: (16, "bool"), 1001: (17, "bytea"), 1003: (19, "name"), 1005: (21, "int2"), 1007: (23, "int4"),
    1016: (20, "int8"), 1021: (700, "float4"), 1022: (701, "float8"), 1014: (1042, "bpchar"),
    1015: (1043, "varchar"), 1028: (26, "oid"), 1115: (1114, "timestamp"), 1182: (1082, "date"),
    1183: (1083, "time"), 1185: (1184, "timestamptz"), 1187: (1186, "interval"), 1231: (1700, "numeric"),
    199: (114, "json"), 2951: (2950, "uuid"), 3807: (3802, "jsonb"),
}


def _type_rows() -> list[dict[str, Any]]:
    """What asyncpg's type introspection returns for each of `BUILTIN_ARRAYS`."""
    return [{"oid": oid, "ns": "pg_catalog", "name": f"_{name}", "kind": b"b", "basetype": None,
             "elemtype": elem, "elemdelim": b",", "range_subtype": None, "attrtypoids": None, "attrnames": None,
             "basetype_name": None, "elemtype_name": name, "range_subtype_name": None}
            for oid, (elem, name) in BUILTIN_ARRAYS.items()]


_ROWS = _type_rows()


def declare_builtin_arrays(conn: object) -> bool:
    """Give `conn` (an asyncpg connection, after its own codecs are set: setting one forgets
    the array codecs) the built-in array codecs; False if asyncpg would not take them."""
    try:
        conn._protocol.get_settings().register_data_types(_ROWS)  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001 - asyncpg's internals moved: it introspects, as before
        log.debug("built-in array codecs not declared (%s: %s); asyncpg will ask the server", type(exc).__name__, exc)
        return False
    return True

"""The current schema as one file to read, `sql/schema.sql`: what `pg_dump --schema-only` prints
for a freshly migrated database, with what varies between runs taken out (the versions, the
`\\restrict` keys, the session SET lines), under a header saying how it is made.

The numbered migrations stay the source of truth; the file's name is no migration's, so the
migration runner skips it. `make schema` rewrites it (`python -m jobdesk.store.schema_dump
sql/schema.sql`), and tests/store/test_schema_file.py fails while it does not match the migrations.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import asyncpg

from jobdesk.core.paths import program_env, sql_dir
from jobdesk.embedded.server import EmbeddedServer
from jobdesk.store.migrations import migrate

HEADER = """\
-- jobdesk's database schema as the migrations leave it: tables, indexes, functions and triggers.
--
-- GENERATED: do not edit. `make schema` writes it (python -m jobdesk.store.schema_dump sql/schema.sql)
-- from a freshly migrated database, with pg_dump --schema-only --no-owner --no-privileges.
-- The numbered migrations in this folder remain the source of truth; change the schema with a new
-- migration, then run `make schema`. tests/store/test_schema_file.py fails while this file is out of date.
"""

# Lines of a dump that differ between runs or say nothing about the schema.
_RESTRICT = re.compile(r"^\\(un)?restrict\b")  # a random key, in pg_dump 17.6 and later
_SESSION_SET = re.compile(r"^(SET [a-z_]+ = .*;|SELECT pg_catalog\.set_config\(.*\);)$")
_FIRST_OBJECT = re.compile(r"^-- Name: ")
# The completed jobs' first bound is the time of the migration (sql/041): the file says so instead.
_MIGRATION_TIME = re.compile(r"(ATTACH PARTITION public\.jobs_completed_(?:start|later) FOR VALUES FROM \()"
                             r"('[^']+'|MINVALUE)(\) TO \()('[^']+'|MAXVALUE)(\))")
_END = "-- PostgreSQL database dump complete"


def schema_path() -> Path:
    """The checked-in file."""
    return sql_dir() / "schema.sql"


def pg_dump_argv(bin_dir: Path, dsn: str) -> list[str]:
    return [str(bin_dir / "pg_dump"), "--schema-only", "--no-owner", "--no-privileges", "--dbname", dsn]


def dump(dsn: str, bin_dir: Path) -> str:
    """pg_dump's schema of the database at `dsn`, as it prints it."""
    done = subprocess.run(pg_dump_argv(bin_dir, dsn), capture_output=True, text=True, env=program_env())
    if done.returncode != 0:
        raise RuntimeError(f"pg_dump failed: {done.stderr.strip()}")
    return done.stdout


def normalise(raw: str) -> str:
    """The objects of a dump alone: from the first object's comment block to the closing comment,
    without the session SET lines (each with the blank line after it) and the \\restrict lines."""
    lines = raw.splitlines()
    start = next((i for i, line in enumerate(lines) if _FIRST_OBJECT.match(line)), None)
    if start is None:
        raise RuntimeError("the dump holds no object")
    # From the "--" above the first name to the one above the closing comment.
    end = next((i - 1 for i, line in enumerate(lines) if line == _END), len(lines))
    kept: list[str] = []
    skip_blank = False
    for line in lines[max(start - 1, 0):end]:
        if skip_blank and not line:
            skip_blank = False
            continue
        skip_blank = False
        if _RESTRICT.match(line) or _SESSION_SET.match(line):
            skip_blank = True
            continue
        kept.append(_MIGRATION_TIME.sub(_when_migrated, line))
    while kept and not kept[-1]:
        kept.pop()
    return "\n".join(kept) + "\n"


def _when_migrated(m: re.Match[str]) -> str:
    def bound(b: str) -> str:
        return b if b in ("MINVALUE", "MAXVALUE") else "'<time of migration 041>'"
    return f"{m.group(1)}{bound(m.group(2))}{m.group(3)}{bound(m.group(4))}{m.group(5)}"


def schema_text(dsn: str, bin_dir: Path) -> str:
    """The file's whole text for the database at `dsn`."""
    return f"{HEADER}\n{normalise(dump(dsn, bin_dir))}"


async def _migrate(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
    finally:
        await conn.close()


def generate() -> str:
    """The file's text from a throwaway server in a temporary folder, started and stopped here."""
    root = Path(tempfile.mkdtemp(prefix="jdschema-"))
    root.chmod(0o755)  # the server may run as an unprivileged user
    server = EmbeddedServer(root)
    try:
        server.prepare_folders()
        server.initdb()
        server.start_child()  # our child, with its database created
        asyncio.run(_migrate(server.dsn))
        return schema_text(server.dsn, server.bin_dir)
    finally:
        server.stop_child()
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str]) -> int:
    """`python -m jobdesk.store.schema_dump [FILE]`: write the schema to FILE, or print it."""
    if len(argv) > 1:
        print("usage: python -m jobdesk.store.schema_dump [FILE]", file=sys.stderr)
        return 2
    text = generate()
    if not argv:
        sys.stdout.write(text)
        return 0
    target = Path(argv[0])
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(target)  # a failed run leaves the old file whole
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

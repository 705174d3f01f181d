"""`jobdesk doctor` on one server: its role, the schema and the workers, in lines and in JSON."""

from __future__ import annotations

import json

import asyncpg

from tests.helpers import run_cli


async def test_doctor_on_one_server(dsn: str) -> None:
    out = run_cli("doctor", dsn=dsn)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "  primary  accepts writes" in out.stdout and "schema: migration" in out.stdout
    assert "standbys: none streams from the primary" in out.stdout
    found = json.loads(run_cli("doctor", "--json", dsn=dsn).stdout)
    assert [h["role"] for h in found["hosts"]] == ["primary"] and found["problems"] == []


async def test_doctor_names_pending_migrations(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("DELETE FROM jobdesk_migrations "
                           "WHERE version = (SELECT max(version) FROM jobdesk_migrations)")
    finally:
        await conn.close()
    out = run_cli("doctor", dsn=dsn)
    assert out.returncode == 1 and "problem: 1 migration(s) not applied: run `jobdesk migrate`" in out.stdout

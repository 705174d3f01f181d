"""`jobdesk submit --at / --in / --unique-key`, and how `jobs` and `show` print them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from tests.helpers import run_cli


def test_submit_in_and_at_schedule_the_job(dsn: str) -> None:
    before = datetime.now(UTC)
    job = json.loads(run_cli("submit", "echo", "--in", "10m", "--json", dsn=dsn).stdout)
    at = datetime.fromisoformat(job["scheduled_at"])
    assert job["status"] == "queued" and timedelta(minutes=9) < at - before < timedelta(minutes=11)
    done = run_cli("submit", "echo", "--at", "2099-03-01T02:00:00+01:00", dsn=dsn)
    assert done.returncode == 0 and "scheduled for 2099-03-01" in done.stdout
    listed = run_cli("jobs", dsn=dsn).stdout
    assert "scheduled in" in listed
    shown = run_cli("show", job["id"], dsn=dsn).stdout
    assert "scheduled" in shown and at.astimezone().strftime("%Y-%m-%d %H:%M:%S") in shown


def test_malformed_times_are_one_line_and_exit_2(dsn: str) -> None:
    for args in (("--in", "soon"), ("--at", "tomorrow"), ("--in", "1m", "--at", "2099-01-01T00:00")):
        done = run_cli("submit", "echo", *args, dsn=dsn)
        assert done.returncode == 2, done
        assert "Traceback" not in done.stderr


def test_submit_unique_key_reports_the_duplicate(dsn: str) -> None:
    first = json.loads(run_cli("submit", "echo", "--unique-key", "nightly", "--json", dsn=dsn).stdout)
    assert first["duplicate"] is False and first["unique_key"] == "nightly"
    again = run_cli("submit", "echo", "--unique-key", "nightly", dsn=dsn)
    assert again.returncode == 0
    assert again.stdout.startswith(first["id"]) and "duplicate" in again.stdout

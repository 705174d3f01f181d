"""`make bench-report`: every engine benchmark runs (at a toy size here), its figures are read
from what it prints, and the table lands between the markers of the page, replacing the last one."""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import report

ROOT = Path(__file__).resolve().parent.parent


def test_the_report_reads_every_benchmark_and_fills_the_page(tmp_path: Path) -> None:
    page = tmp_path / "performance.md"
    page.write_text("# Performance\n\n### Engine\n\n" + report.START + "\nold table\n" + report.END + "\n\nAfter.\n")
    proc = subprocess.run([sys.executable, "benchmarks/report.py", "--tiny", "--output", str(page)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = page.read_text()
    assert "old table" not in text and text.startswith("# Performance") and text.rstrip().endswith("After.")
    assert text.count(report.START) == 1 and text.count(report.END) == 1
    rows = [line for line in text.splitlines() if line.startswith("| ") and line.rstrip().endswith(".py` |")]
    scripts = {re.search(r"`benchmarks/(\w+\.py)` \|$", row).group(1) for row in rows}  # type: ignore[union-attr]
    assert scripts == {stage.script for stage in report.STAGES}
    assert all(re.search(r"\d", row.split("|")[2]) for row in rows), rows  # every figure has a number
    commands = [line for line in text.splitlines() if line.startswith("- `.venv/bin/python benchmarks/")]
    assert len(commands) == len(report.STAGES) and all("--" in c for c in commands)
    assert f"Measured on {datetime.date.today().isoformat()} at commit `" in text


def test_a_benchmark_that_prints_no_figure_is_an_error() -> None:
    with pytest.raises(ValueError, match="no THROUGHPUT line"):
        report.read_engine("jobdesk engine benchmark: 300 no-op jobs\n")


def test_a_page_without_markers_gets_the_table_at_its_end(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("# P\n")
    report.write(page, report.START + "\nT\n" + report.END)
    report.write(page, report.START + "\nU\n" + report.END)
    assert page.read_text() == "# P\n\n" + report.START + "\nU\n" + report.END + "\n"

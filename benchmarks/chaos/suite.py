"""Runs chosen cases in turn on one server and gathers their results; `main` is the command."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from benchmarks.chaos import measure
from benchmarks.chaos.cluster import Server, build_template
from benchmarks.chaos.scenarios import BY_NAME, CASES, run_case


def run_suite(names: list[str], *, quick: bool, keep: bool = False,
              on_result: Callable[[measure.CaseResult], None] | None = None) -> list[measure.CaseResult]:
    """Start a server, run the named cases, stop the server; return their results."""
    workdir = Path(tempfile.mkdtemp(prefix="jdchaos-"))
    workdir.chmod(0o755)
    server = Server()
    results: list[measure.CaseResult] = []
    try:
        server.start()

        async def everything() -> None:
            await build_template(server)
            for name in names:
                started = time.monotonic()
                result = await run_case(server, BY_NAME[name], quick, workdir)
                result.notes["case_s"] = round(time.monotonic() - started, 1)
                results.append(result)
                if on_result is not None:
                    on_result(result)

        asyncio.run(everything())
    finally:
        server.stop()
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"run files kept in {workdir}", file=sys.stderr)
    return results


def _print_progress(result: measure.CaseResult) -> None:
    print(f"{result.name}: {json.dumps({k: v for k, v in asdict(result).items() if k != 'name'}, default=str)}",
          file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.chaos", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="each case a few seconds (what `make test` runs)")
    parser.add_argument("--case", action="append", choices=sorted(BY_NAME), help="run only this case (repeatable)")
    parser.add_argument("--keep", action="store_true", help="keep the workers' logs and run files")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    names = args.case or [c.name for c in CASES]
    started = time.monotonic()
    results = run_suite(names, quick=args.quick, keep=args.keep, on_result=_print_progress)
    print(f"\nchaos suite ({'quick' if args.quick else 'full'}), {time.monotonic() - started:.0f} s\n")
    print(measure.markdown_table(results))
    for r in results:
        if r.samples or r.name == "idle_tx":
            print(f"\n{r.title}:\n")
            print(measure.pressure_tables(r))
    bad = [r.name for r in results if r.lost or r.beyond]
    if bad:
        print(f"\nFAILED: jobs lost or run twice beyond at-least-once in {', '.join(bad)}")
    return 1 if bad else 0

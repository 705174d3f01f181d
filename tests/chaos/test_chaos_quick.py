"""The chaos suite's short version (`python -m benchmarks.chaos --quick`): every case, a few
seconds each, on its own PostgreSQL with two real worker processes and a producer at a fixed
rate. No job is lost and none runs twice beyond at-least-once; each fault really happened."""

from __future__ import annotations

import pytest

from benchmarks.chaos.scenarios import CASES
from benchmarks.chaos.suite import run_suite


@pytest.mark.timeout(400)
def test_every_case_loses_nothing_and_runs_nothing_twice_beyond_at_least_once() -> None:
    results = {r.name: r for r in run_suite([c.name for c in CASES], quick=True)}
    assert sorted(results) == sorted(c.name for c in CASES)
    problems = []
    for r in results.values():
        if r.lost or r.beyond or not r.notes["drained"] or r.notes["completed_without_a_run"]:
            problems.append(f"{r.name}: {r.lost} lost, {r.beyond} beyond at-least-once {r.beyond_ids}, drained "
                            f"{r.notes['drained']}, completed without a run {r.notes['completed_without_a_run']}")
        if r.enqueued < 200 or r.completed != r.enqueued:
            problems.append(f"{r.name}: {r.enqueued} enqueued, {r.completed} completed")
        if r.notes["statuses"] != {"completed": r.notes["statuses"].get("completed")}:
            problems.append(f"{r.name}: jobs left in other statuses {r.notes['statuses']}")
        done_after = r.phases[-1]["completed_per_s"]
        if not done_after:
            problems.append(f"{r.name}: no job completed after the fault")
    assert not problems, "\n".join(problems)

    # Each fault was real, and the workers kept going or came back.
    assert results["kill"].notes["kills"] >= 2
    assert results["restart"].notes["down_s"] > 0
    assert results["terminate"].notes["backends_cut"] > 0
    assert results["idle_conns"].notes["idle_refused"] > 0, "the idle connections did not exhaust the slots"
    assert results["idle_conns"].notes["idle_opened"] > 0
    assert results["readers"].notes["scans"] > 0
    assert results["overload"].phases[-2]["offered"] > results["overload"].phases[0]["offered"]
    assert [s["when"] for s in results["idle_tx"].samples][0] == "before"  # sizes read before, during, after
    assert len(results["idle_tx"].samples) >= 3

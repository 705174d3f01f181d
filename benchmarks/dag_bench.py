"""How long a 1,000-job pipeline takes to lay out and draw in the DAG view (offscreen).

    QT_QPA_PLATFORM=offscreen python benchmarks/dag_bench.py [--jobs 1000] [--runs 5]

The pipeline is shaped like a real fan-out: a few setup stages, parallel branches of chained
stages that join now and then, and a final merge. Prints the layout time, the scene build and
the first full paint of the fitted view, and their sum.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from PySide6.QtGui import QImage, QPainter
from PySide6.QtWidgets import QApplication

from jobdesk.console.pipelines.dag_layout import layered_layout
from jobdesk.console.pipelines.dag_view import DagView
from jobdesk.core.models import Status
from jobdesk.store.pipelines import GraphNode


def pipeline(n: int, seed: int = 1) -> list[GraphNode]:
    rng = random.Random(seed)
    now = datetime.now(UTC)
    statuses = [Status.COMPLETED] * 6 + [Status.IN_PROGRESS, Status.QUEUED, Status.FAILED, Status.WAITING_APPROVAL]
    nodes: list[GraphNode] = []

    def add(kind: str, deps: list[str]) -> str:
        i = len(nodes)
        started = now - timedelta(seconds=rng.uniform(1, 600))
        nodes.append(GraphNode(id=f"job-{i:05d}", type=kind, status=rng.choice(statuses), attempts=rng.randint(0, 3),
                               retry_count=0, depends_on=deps, created_at=started, started_at=started,
                               completed_at=None, updated_at=now, seq=i))
        return nodes[-1].id

    setup = add("fetch.source", [])
    setup = add("split.input", [setup])
    branches = 40
    tails = [add("branch.prepare", [setup]) for _ in range(branches)]
    while len(nodes) < n - 1:
        b = rng.randrange(branches)
        deps = [tails[b]]
        if rng.random() < 0.1:  # an occasional join with a neighbouring branch
            deps.append(tails[(b + 1) % branches])
        tails[b] = add(rng.choice(["transcode", "thumbnail", "caption", "analyse", "upload"]), deps)
    add("merge.report", sorted(set(tails)))
    return nodes


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    app = QApplication.instance() or QApplication([sys.argv[0]])
    nodes = pipeline(args.jobs)
    view = DagView()
    view.resize(1200, 700)
    view.show()
    app.processEvents()
    layout_ms, build_ms, paint_ms, total_ms = [], [], [], []
    for run in range(args.runs):
        t0 = time.perf_counter()
        layout = layered_layout([n.id for n in nodes], {n.id: n.depends_on for n in nodes})
        t1 = time.perf_counter()
        view.set_graph(f"bench-{run}", nodes)  # lays out again, builds the scene, fits
        t2 = time.perf_counter()
        image = QImage(view.viewport().size(), QImage.Format.Format_ARGB32_Premultiplied)
        painter = QPainter(image)
        view.render(painter)
        painter.end()
        t3 = time.perf_counter()
        layout_ms.append((t1 - t0) * 1000)
        build_ms.append((t2 - t1) * 1000 - layout_ms[-1])
        paint_ms.append((t3 - t2) * 1000)
        total_ms.append((t3 - t1) * 1000)
    print(f"DAG view, {len(nodes):,} jobs, {len(view.edges):,} edges, {len(layout.layers)} layers, "
          f"{layout.crossings:,} crossings left, {args.runs} runs (median):")
    print(f"  layout            {statistics.median(layout_ms):7.1f} ms")
    print(f"  scene build + fit {statistics.median(build_ms):7.1f} ms")
    print(f"  first paint       {statistics.median(paint_ms):7.1f} ms")
    print(f"  total             {statistics.median(total_ms):7.1f} ms  (max {max(total_ms):.1f}; runs: "
          + ", ".join(f"{t:.0f}" for t in total_ms) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())

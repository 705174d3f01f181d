"""Layered left-to-right layout of a pipeline's DAG, with few edge crossings.

The usual layered ("Sugiyama") recipe, kept small: each job goes one layer right of its
furthest parent; edges that skip layers get invisible waypoints so they route between nodes;
the order within each layer comes from barycentre sweeps, keeping the order with the fewest
crossings. Pure Python and Qt-free, so it is easy to test and to benchmark.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

NODE_W = 190.0
NODE_H = 64.0
LAYER_GAP = 70.0  # between layers, horizontally
ROW_GAP = 22.0  # between nodes of one layer, vertically
SWEEPS = 6
MAX_WAYPOINTS_PER_NODE = 4  # beyond this, long edges are drawn straight instead


@dataclass
class Layout:
    """Where each node's top-left corner goes, and the points each edge passes through."""

    positions: dict[str, tuple[float, float]] = field(default_factory=dict)
    layers: list[list[str]] = field(default_factory=list)  # real node ids, in drawing order
    edges: list[tuple[str, str, list[tuple[float, float]]]] = field(default_factory=list)  # parent, child, bends
    crossings: int = 0


def layered_layout(nodes: Sequence[str], parents: Mapping[str, Sequence[str]]) -> Layout:
    """Lay out `nodes` (parents before children, as in enqueue order) with edges parent -> child.

    Parents that are not among `nodes` are ignored.
    """
    known = set(nodes)
    parent_lists = {n: [p for p in dict.fromkeys(parents.get(n, ())) if p in known and p != n] for n in nodes}
    layer_of = _assign_layers(nodes, parent_lists)
    if not layer_of:
        return Layout()

    # Build the layered graph, with waypoints on edges that skip layers.
    depth = max(layer_of.values()) + 1
    order: list[list[str]] = [[] for _ in range(depth)]
    for n in nodes:
        order[layer_of[n]].append(n)
    ups: dict[str, list[str]] = {n: [] for n in nodes}  # vertex -> vertices one layer left
    downs: dict[str, list[str]] = {n: [] for n in nodes}
    chains: list[tuple[str, str, list[str]]] = []
    span_total = sum(layer_of[c] - layer_of[p] - 1 for c in nodes for p in parent_lists[c])
    use_waypoints = span_total <= MAX_WAYPOINTS_PER_NODE * len(nodes)
    for child in nodes:
        for parent in parent_lists[child]:
            prev, chain = parent, []
            if use_waypoints:
                for between in range(layer_of[parent] + 1, layer_of[child]):
                    way = f"\0{parent}\0{child}\0{between}"
                    ups[way], downs[way] = [prev], []
                    downs[prev].append(way)
                    order[between].append(way)
                    chain.append(way)
                    prev = way
            ups[child].append(prev)
            downs[prev].append(child)
            chains.append((parent, child, chain))

    order, crossings = _reduce_crossings(order, ups, downs)

    layout = Layout(crossings=crossings)
    tallest = max(len(layer) for layer in order)
    for index, layer in enumerate(order):
        x = index * (NODE_W + LAYER_GAP)
        top = (tallest - len(layer)) * (NODE_H + ROW_GAP) / 2
        for row, vertex in enumerate(layer):
            layout.positions[vertex] = (x, top + row * (NODE_H + ROW_GAP))
        layout.layers.append([v for v in layer if not v.startswith("\0")])
    for parent, child, chain in chains:
        bends = [(layout.positions[w][0] + NODE_W / 2, layout.positions[w][1] + NODE_H / 2) for w in chain]
        layout.edges.append((parent, child, bends))
    for way in [v for v in layout.positions if v.startswith("\0")]:
        del layout.positions[way]
    return layout


def _assign_layers(nodes: Sequence[str], parents: Mapping[str, list[str]]) -> dict[str, int]:
    """Longest path from the sources; a parent listed after its child is placed first anyway."""
    layer_of: dict[str, int] = {}
    pending = list(nodes)
    while pending:
        deferred = []
        for n in pending:
            if all(p in layer_of for p in parents[n]):
                layer_of[n] = 1 + max((layer_of[p] for p in parents[n]), default=-1)
            else:
                deferred.append(n)
        if len(deferred) == len(pending):  # a cycle cannot be stored, but never loop forever
            for n in deferred:
                layer_of[n] = 1 + max((layer_of.get(p, -1) for p in parents[n]), default=-1)
            break
        pending = deferred
    return layer_of


def _reduce_crossings(order: list[list[str]], ups: Mapping[str, list[str]],
                      downs: Mapping[str, list[str]]) -> tuple[list[list[str]], int]:
    best = [list(layer) for layer in order]
    best_crossings = _count_all(best, downs)
    current = [list(layer) for layer in order]
    for sweep in range(SWEEPS):
        if best_crossings == 0:
            break
        if sweep % 2 == 0:
            for i in range(1, len(current)):
                current[i] = _by_barycentre(current[i], current[i - 1], ups)
        else:
            for i in range(len(current) - 2, -1, -1):
                current[i] = _by_barycentre(current[i], current[i + 1], downs)
        crossings = _count_all(current, downs)
        if crossings < best_crossings:
            best, best_crossings = [list(layer) for layer in current], crossings
    return best, best_crossings


def _by_barycentre(layer: list[str], fixed: list[str], neighbours: Mapping[str, list[str]]) -> list[str]:
    pos = {v: i for i, v in enumerate(fixed)}

    def key(item: tuple[int, str]) -> float:
        index, vertex = item
        linked = [pos[n] for n in neighbours[vertex] if n in pos]
        return sum(linked) / len(linked) if linked else float(index)  # unlinked vertices keep their place

    return [v for _, v in sorted(enumerate(layer), key=key)]


def _count_all(order: list[list[str]], downs: Mapping[str, list[str]]) -> int:
    return sum(_count_between(order[i], order[i + 1], downs) for i in range(len(order) - 1))


def _count_between(left: list[str], right: list[str], downs: Mapping[str, list[str]]) -> int:
    """Crossings between two adjacent layers: inversions among edges sorted by their left end."""
    pos = {v: i for i, v in enumerate(right)}
    targets = [pos[c] for v in left for c in sorted(downs[v], key=pos.__getitem__) if c in pos]
    crossings = 0
    seen: list[int] = []
    for t in targets:
        crossings += len(seen) - bisect.bisect_right(seen, t)
        bisect.insort(seen, t)
    return crossings

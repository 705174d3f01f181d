"""The layered DAG layout, without Qt."""

from __future__ import annotations

import random

from jobdesk.console.pipelines.dag_layout import NODE_W, layered_layout


def test_layers_follow_dependencies_left_to_right() -> None:
    parents = {"voice": ["script"], "image": ["script"], "render": ["voice", "image"], "composite": ["render"]}
    layout = layered_layout(["script", "voice", "image", "render", "composite"], parents)
    assert [sorted(layer) for layer in layout.layers] == [["script"], ["image", "voice"], ["render"], ["composite"]]
    x = {n: p[0] for n, p in layout.positions.items()}
    assert x["script"] < x["voice"] == x["image"] < x["render"] < x["composite"]
    assert {(p, c) for p, c, _ in layout.edges} == {(p, c) for c, ps in parents.items() for p in ps}
    assert layout.crossings == 0


def test_an_edge_that_skips_a_layer_routes_between_nodes() -> None:
    layout = layered_layout(["a", "b", "c"], {"b": ["a"], "c": ["a", "b"]})
    [bends] = [b for p, c, b in layout.edges if (p, c) == ("a", "c")]
    assert len(bends) == 1 and bends[0][0] == layout.positions["b"][0] + NODE_W / 2


def test_barycentre_sweeps_remove_avoidable_crossings() -> None:
    # Two chains whose second layer is listed crosswise: a1->b1, a2->b2 with b2 before b1.
    layout = layered_layout(["a1", "a2", "b2", "b1"], {"b1": ["a1"], "b2": ["a2"]})
    assert layout.crossings == 0
    ys = {n: p[1] for n, p in layout.positions.items()}
    assert (ys["a1"] < ys["a2"]) == (ys["b1"] < ys["b2"])


def test_unknown_parents_are_ignored_and_nodes_never_overlap() -> None:
    rng = random.Random(7)
    nodes = [f"n{i}" for i in range(300)]
    parents = {n: [nodes[j] for j in rng.sample(range(i), min(i, 2))] + ["outside"] for i, n in enumerate(nodes)}
    layout = layered_layout(nodes, parents)
    assert set(layout.positions) == set(nodes)
    assert len(set(layout.positions.values())) == len(nodes)
    assert all(not p.startswith("\0") for layer in layout.layers for p in layer)

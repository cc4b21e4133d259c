"""The layered layout: edges run left to right, layers never overlap, and a crossing that
an order of the layers avoids is avoided."""

from __future__ import annotations

import itertools
import random

from lineage.graphs.layout import (
    LABEL_SIDE,
    LAYER_GAP,
    MAX_LAYER_GAP,
    count_crossings,
    layout,
)


def sizes(nodes, width=60.0, height=30.0):
    return {n: (width, height) for n in nodes}


def test_edges_run_left_to_right():
    random.seed(7)
    nodes = list(range(40))
    edges = sorted({(random.randrange(i), i) for i in range(1, 40) for _ in range(2)})
    result = layout(nodes, edges, sizes(nodes))
    for a, b in edges:
        assert result.nodes[a].layer < result.nodes[b].layer
        assert result.nodes[a].right < result.nodes[b].x


def test_the_nodes_of_a_layer_never_overlap():
    random.seed(3)
    nodes = list(range(60))
    edges = sorted({(random.randrange(i), i) for i in range(1, 60) for _ in range(3)})
    result = layout(nodes, edges, sizes(nodes))
    by_layer = {}
    for _node, placed in result.nodes.items():
        by_layer.setdefault(placed.layer, []).append((placed.y, placed.y + placed.height))
    for spans in by_layer.values():
        spans.sort()
        for (_, bottom), (top, _) in itertools.pairwise(spans):
            assert top >= bottom


def test_a_crossing_the_given_order_makes_is_undone():
    nodes = ["a", "b", "x", "y"]
    edges = [("a", "y"), ("b", "x")]
    result = layout(nodes, edges, sizes(nodes))
    links = {"a": ["y"], "b": ["x"]}
    assert count_crossings(result.layers, links) == 0
    assert (result.nodes["a"].y < result.nodes["b"].y) == (
        result.nodes["y"].y < result.nodes["x"].y
    )


def test_interleaved_chains_are_drawn_without_crossings():
    # three chains of four, their nodes given round-robin and shuffled per layer
    chains = [[f"{c}{i}" for i in range(4)] for c in "pqr"]
    nodes = [chains[(i * 2 + k) % 3][i] for i in range(4) for k in range(3)]
    edges = [(chain[i], chain[i + 1]) for chain in chains for i in range(3)]
    edges += [("p0", "q1"), ("q2", "r3")]
    result = layout(nodes, edges, sizes(nodes))
    links = {}
    for a, b in edges:
        links.setdefault(a, []).append(b)
    assert count_crossings(result.layers, links) == 0


def test_a_long_edge_goes_through_a_point_in_each_layer_it_crosses():
    nodes = ["a", "b", "c", "d"]
    edges = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")]
    result = layout(nodes, edges, sizes(nodes))
    assert len(result.routes[3]) == 4  # out of a, two layers between, into d
    xs = [x for x, _ in result.routes[3]]
    assert xs == sorted(xs)


def test_a_cycle_is_drawn_with_one_edge_reversed():
    nodes = ["a", "b", "c"]
    edges = [("a", "b"), ("b", "c"), ("c", "a"), ("b", "b")]
    result = layout(nodes, edges, sizes(nodes))
    assert result.reversed_edges == {2}
    assert result.nodes["a"].layer < result.nodes["b"].layer < result.nodes["c"].layer
    assert 3 in result.routes  # the self-loop is drawn too


def test_an_empty_graph_has_a_size():
    result = layout([], [], {})
    assert result.width > 0 and result.height > 0
    assert result.nodes == {}


def test_crossings_are_counted_as_every_pair_of_edges_compared():
    random.seed(5)
    for _ in range(30):
        upper, lower = list(range(8)), list(range(100, 109))
        links = {a: random.sample(lower, random.randint(0, 4)) for a in upper}
        slow = sum(
            1
            for (i, a), (j, b) in itertools.combinations(enumerate(upper), 2)
            for x in links[a]
            for y in links[b]
            if lower.index(y) < lower.index(x)
        )
        assert count_crossings([upper, lower], links) == slow


def test_the_gap_after_a_layer_widens_to_hold_the_labels_of_its_edges():
    nodes, edges = ["a", "b", "c"], [("a", "b"), ("b", "c")]
    plain = layout(nodes, edges, sizes(nodes))
    wide = layout(nodes, edges, sizes(nodes), {0: 150.0})
    assert plain.nodes["b"].x - plain.nodes["a"].right == LAYER_GAP
    assert wide.nodes["b"].x - wide.nodes["a"].right == 150 + 2 * LABEL_SIDE
    assert wide.nodes["c"].x - wide.nodes["b"].right == LAYER_GAP
    huge = layout(nodes, edges, sizes(nodes), {0: 5000.0})
    assert huge.nodes["b"].x - huge.nodes["a"].right == MAX_LAYER_GAP

"""Edge labels go on their own curve, clear of nodes and of each other, or nowhere."""

from __future__ import annotations

import itertools

from lineage.graphs.labels import Box, curve_point, place


def test_the_curve_runs_from_one_end_to_the_other_through_the_middle():
    assert curve_point((0, 0), (100, 40), 0) == (0, 0)
    assert curve_point((0, 0), (100, 40), 1) == (100, 40)
    assert curve_point((0, 0), (100, 40), 0.5) == (50, 20)


def test_a_label_goes_to_the_middle_of_its_edge_when_there_is_room():
    placed = place(
        [Box(0, 0, 50, 30), Box(150, 0, 50, 30)], {0: [(50, 15), (150, 15)]}, {0: (40, 12)}
    )
    assert placed == {0: Box(80, 9, 40, 12)}


def test_labels_of_parallel_edges_are_moved_along_them_rather_than_piled_up():
    nodes = [Box(0, 0, 50, 30), Box(250, 0, 50, 30)]
    routes = {i: [(50, 15.0 + i), (250, 15.0 + i)] for i in range(3)}
    placed = place(nodes, routes, dict.fromkeys(routes, (40.0, 12.0)))
    assert sorted(placed) == [0, 1, 2]
    for a, b in itertools.combinations(placed.values(), 2):
        assert not a.intersects(b)


def test_a_label_with_no_room_on_its_edge_is_left_out():
    nodes = [Box(0, 0, 50, 30), Box(60, 0, 50, 30)]  # a gap narrower than the label
    assert place(nodes, {0: [(50, 15), (60, 15)]}, {0: (40, 12)}) == {}

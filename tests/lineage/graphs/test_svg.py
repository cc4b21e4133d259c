"""The SVG drawing of a graph."""

from __future__ import annotations

import itertools
import time
import xml.etree.ElementTree as ET

from lineage import graphs
from lineage.graphs import svg, text
from lineage.graphs.labels import Box
from tests.helpers.graphs import (
    column_lineage_graph,
    crowded_graph,
    long_names_graph,
    odd_graph,
    provenance_like_graph,
)

SVG = "{http://www.w3.org/2000/svg}"


def test_the_svg_is_well_formed_xml_with_escaped_labels_and_links():
    root = ET.fromstring(graphs.to_svg(odd_graph()))
    assert root.tag == f"{SVG}svg"
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert 'tbl "x" <&>' in texts and 'CAST, "odd"' in texts
    links = [a.get("href") for a in root.iter(f"{SVG}a")]
    assert links == ["/ui/tables/1?a=1&b=2"]
    edges = [p for p in root.iter(f"{SVG}path") if p.get("class") == "edge"]
    assert [(e.get("data-source"), e.get("data-target")) for e in edges] == [("x", "y")]


def test_a_huge_graph_is_cut_and_says_so():
    graph = graphs.Graph("table", "big")
    for i in range(graphs.MAX_NODES + 10):
        graph.add(graphs.GraphNode(f"n{i}", f"t{i}", "table"))
    assert len(graph.nodes) == graphs.MAX_NODES and graph.truncated
    assert "cut at" in graphs.to_svg(graph)


def node_tooltips(root) -> dict[str, str]:
    return {
        g.get("data-id"): g.findtext(f"{SVG}title")
        for g in root.iter(f"{SVG}g")
        if "node" in (g.get("class") or "").split()
    }


def assert_readable(graph: graphs.Graph) -> svg.Drawing:
    """No label over a label or a node, everything inside the view box, every text inside
    its box or cut with an ellipsis and whole in a tooltip."""
    drawing = svg.draw(graph)
    root = ET.fromstring(svg.to_svg(graph))
    view = Box(0, 0, drawing.width, drawing.height)
    assert root.get("viewBox") == f"0 0 {drawing.width:.0f} {drawing.height:.0f}"
    assert root.get("width") == f"{drawing.width:.0f}"  # natural size, never scaled down

    nodes = list(drawing.nodes.values())
    labels = [box for _, box in drawing.labels.values()]
    for a, b in itertools.combinations(nodes, 2):
        assert not a.intersects(b)
    for a, b in itertools.combinations(labels, 2):
        assert not a.intersects(b)
    for label in labels:
        assert not any(label.intersects(node) for node in nodes)
    everything = [*nodes, *labels, drawing.title_box, *(box for _, box in drawing.notes)]
    for box in everything:
        assert view.contains(box)
    for route in drawing.routes.values():
        for x, y in route:
            assert view.contains(Box(x, y, 0, 0))
    assert not drawing.title_box.intersects(Box(0, min(b.y for b in nodes), view.width, 1))

    tooltips = node_tooltips(root)
    for node_id, node in graph.nodes.items():
        box, lines = drawing.nodes[node_id], drawing.texts[node_id]
        bold = node.kind in svg.BOLD_KINDS
        assert text.width(lines.label, svg.FONT, bold) + 2 * svg.PAD <= box.width
        assert text.width(lines.detail, svg.SMALL) + 2 * svg.PAD <= box.width
        for shown, whole in ((lines.label, node.label), (lines.detail, node.detail)):
            if shown != whole:
                assert shown.endswith(text.ELLIPSIS) and whole.startswith(shown[:-1])
                assert whole in tooltips[node_id]
    if drawing.title != graph.title:
        title = next(t for t in root.iter(f"{SVG}text") if t.get("class") == "graph-title")
        assert drawing.title.endswith(text.ELLIPSIS)
        assert title.findtext(f"{SVG}title") == graph.title

    edge_tooltips = [
        g.findtext(f"{SVG}title")
        for g in root.iter(f"{SVG}g")
        if (g.get("class") or "").startswith("edge-group")
    ]
    for i, edge in enumerate(graph.edges):
        if edge.label:
            assert edge_tooltips[i].endswith(f": {edge.label}")  # whole, drawn or not
            assert (i in drawing.labels) != (i in drawing.hidden_labels)
    return drawing


def test_long_names_are_cut_with_an_ellipsis_and_whole_in_the_tooltip():
    graph = long_names_graph()
    drawing = assert_readable(graph)
    cut = [i for i, lines in drawing.texts.items() if lines.label != graph.nodes[i].label]
    assert cut == ["n0", "n2", "n4"]  # the short names are drawn whole
    assert drawing.texts["n1"].label == "staging.customer_orders_cleaned"
    assert drawing.title.endswith(text.ELLIPSIS)
    # a long label widens the gap it sits in, up to a limit, and is drawn there
    assert 0 in drawing.labels and drawing.labels[0][0].endswith(text.ELLIPSIS)


def test_labels_that_do_not_fit_between_two_layers_go_to_the_tooltip_and_say_so():
    graph = crowded_graph()
    drawing = assert_readable(graph)
    assert drawing.labels and drawing.hidden_labels
    assert len(drawing.labels) + len(drawing.hidden_labels) == len(graph.edges)
    notes = [note for note, _ in drawing.notes]
    assert notes == [
        f"{len(drawing.hidden_labels)} edge labels had no room: point at an edge to read its label"
    ]
    hidden = ET.fromstring(svg.to_svg(graph)).iter(f"{SVG}g")
    assert sum("label-hidden" in (g.get("class") or "") for g in hidden) == len(
        drawing.hidden_labels
    )


def test_a_graph_of_120_columns_is_drawn_readable_and_quickly():
    graph = column_lineage_graph(120)
    assert len(graph.nodes) == 120 and len(graph.edges) > 150
    started = time.monotonic()
    svg.to_svg(graph)
    assert time.monotonic() - started < 3.0
    drawing = assert_readable(graph)
    # most labels find room on their own edge
    assert len(drawing.labels) >= 0.9 * sum(1 for e in graph.edges if e.label)


def test_a_provenance_of_over_100_nodes_is_drawn_readable():
    graph = provenance_like_graph()
    assert len(graph.nodes) > 100
    drawing = assert_readable(graph)
    assert len(drawing.labels) >= 0.9 * sum(1 for e in graph.edges if e.label)


def test_the_largest_graph_is_drawn_in_bounded_time():
    graph = column_lineage_graph(graphs.MAX_NODES, layers=20, seed=11)
    assert len(graph.nodes) == graphs.MAX_NODES
    started = time.monotonic()
    svg.to_svg(graph)
    assert time.monotonic() - started < 15.0

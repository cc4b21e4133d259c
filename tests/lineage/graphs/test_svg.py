"""The SVG drawing of a graph."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from lineage import graphs
from tests.lineage.graphs.helpers import odd_graph

SVG = "{http://www.w3.org/2000/svg}"


def test_the_svg_is_well_formed_xml_with_escaped_labels_and_links():
    root = ET.fromstring(graphs.to_svg(odd_graph()))
    assert root.tag == f"{SVG}svg"
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert 'tbl "x" <&>' in texts and 'CAST, "odd"' in texts
    links = [a.get("href") for a in root.iter(f"{SVG}a")]
    assert links == ["/ui/tables/1?a=1&b=2"]
    assert len(list(root.iter(f"{SVG}path"))) == 2  # the arrowhead and the one edge


def test_a_huge_graph_is_cut_and_says_so():
    graph = graphs.Graph("table", "big")
    for i in range(graphs.MAX_NODES + 10):
        graph.add(graphs.GraphNode(f"n{i}", f"t{i}", "table"))
    assert len(graph.nodes) == graphs.MAX_NODES and graph.truncated
    assert "cut at" in graphs.to_svg(graph)
